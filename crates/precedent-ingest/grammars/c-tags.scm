; Tags for C (tree-sitter-c 0.24), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name. Function declarators may sit
; under one or two pointer declarators (`char **name(void)`).

(function_definition
  declarator: [
    (function_declarator declarator: (identifier) @name.definition.function)
    (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name.definition.function))
    (pointer_declarator
      declarator: (pointer_declarator
        declarator: (function_declarator declarator: (identifier) @name.definition.function)))
  ]) @definition.function

; Prototypes (a header's declarations).
(declaration
  type: (_)
  declarator: [
    (function_declarator declarator: (identifier) @name.definition.function)
    (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name.definition.function))
  ]) @definition.function

(struct_specifier
  name: (type_identifier) @name.definition.struct
  body: (_)) @definition.struct

(union_specifier
  name: (type_identifier) @name.definition.union
  body: (_)) @definition.union

(enum_specifier
  name: (type_identifier) @name.definition.enum
  body: (_)) @definition.enum

(type_definition
  declarator: [
    (type_identifier) @name.definition.type
    (pointer_declarator declarator: (type_identifier) @name.definition.type)
  ]) @definition.type

(preproc_function_def
  name: (identifier) @name.definition.macro) @definition.macro

(call_expression
  function: (identifier) @name.reference.call) @reference.call

(call_expression
  function: (field_expression
    field: (field_identifier) @name.reference.call)) @reference.call

(type_identifier) @name.reference.type
