; Tags for C++ (tree-sitter-cpp 0.23), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name.
;
; An out-of-line member (`void Foo::bar()`) captures its whole
; `qualified_identifier` as the name: `symbols.rs` splits it into the member
; (`bar`) and its qualified name (`Foo::bar`, template arguments dropped).
; Function declarators may sit under a pointer or reference declarator
; (`T* name()`, `T& name()`).

(function_definition
  declarator: [
    (function_declarator declarator: (identifier) @name.definition.function)
    (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name.definition.function))
    (reference_declarator
      (function_declarator declarator: (identifier) @name.definition.function))
  ]) @definition.function

; Members defined in their class (and constructors, destructors, operators).
(function_definition
  declarator: [
    (function_declarator
      declarator: [(field_identifier) (destructor_name) (operator_name)] @name.definition.method)
    (pointer_declarator
      declarator: (function_declarator declarator: (field_identifier) @name.definition.method))
    (reference_declarator
      (function_declarator
        declarator: [(field_identifier) (operator_name)] @name.definition.method))
  ]) @definition.method

; Members defined out of line: `void Foo::bar()`, `Foo::~Foo()`, `T& Foo<T>::operator=()`.
(function_definition
  declarator: [
    (function_declarator declarator: (qualified_identifier) @name.definition.method)
    (pointer_declarator
      declarator: (function_declarator declarator: (qualified_identifier) @name.definition.method))
    (reference_declarator
      (function_declarator declarator: (qualified_identifier) @name.definition.method))
  ]) @definition.method

; Member declarations in a class body.
(field_declaration
  declarator: [
    (function_declarator
      declarator: [(field_identifier) (operator_name)] @name.definition.method)
    (pointer_declarator
      declarator: (function_declarator declarator: (field_identifier) @name.definition.method))
    (reference_declarator
      (function_declarator declarator: (field_identifier) @name.definition.method))
  ]) @definition.method

; Prototypes (a header's declarations).
(declaration
  type: (_)
  declarator: [
    (function_declarator declarator: (identifier) @name.definition.function)
    (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name.definition.function))
    (reference_declarator
      (function_declarator declarator: (identifier) @name.definition.function))
  ]) @definition.function

(class_specifier
  name: [
    (type_identifier) @name.definition.class
    (template_type name: (type_identifier) @name.definition.class)
  ]
  body: (_)) @definition.class

(struct_specifier
  name: [
    (type_identifier) @name.definition.struct
    (template_type name: (type_identifier) @name.definition.struct)
  ]
  body: (_)) @definition.struct

(union_specifier
  name: (type_identifier) @name.definition.union
  body: (_)) @definition.union

(enum_specifier
  name: (type_identifier) @name.definition.enum
  body: (_)) @definition.enum

(namespace_definition
  name: [(namespace_identifier) (nested_namespace_specifier)] @name.definition.module) @definition.module

(type_definition
  declarator: [
    (type_identifier) @name.definition.type
    (pointer_declarator declarator: (type_identifier) @name.definition.type)
  ]) @definition.type

(alias_declaration
  name: (type_identifier) @name.definition.type) @definition.type

(preproc_function_def
  name: (identifier) @name.definition.macro) @definition.macro

(call_expression
  function: [
    (identifier) @name.reference.call
    (qualified_identifier name: (identifier) @name.reference.call)
    (template_function name: (identifier) @name.reference.call)
    (qualified_identifier name: (template_function name: (identifier) @name.reference.call))
    (field_expression field: (field_identifier) @name.reference.call)
    (field_expression field: (template_method name: (field_identifier) @name.reference.call))
  ]) @reference.call

(new_expression
  type: [
    (type_identifier) @name.reference.class
    (template_type name: (type_identifier) @name.reference.class)
    (qualified_identifier name: (type_identifier) @name.reference.class)
  ]) @reference.class

(base_class_clause
  [
    (type_identifier) @name.reference.implementation
    (template_type name: (type_identifier) @name.reference.implementation)
    (qualified_identifier name: (type_identifier) @name.reference.implementation)
  ])

(type_identifier) @name.reference.type
