; Tags for TypeScript / TSX (tree-sitter-typescript 0.23), aider convention.
; Appended to javascript-tags.scm: these are the TypeScript-only patterns.

(function_signature
  name: (identifier) @name.definition.function) @definition.function

(method_signature
  name: (property_identifier) @name.definition.method) @definition.method

(abstract_method_signature
  name: (property_identifier) @name.definition.method) @definition.method

(abstract_class_declaration
  name: (type_identifier) @name.definition.class) @definition.class

(module
  name: [(identifier) (string)] @name.definition.module) @definition.module

(internal_module
  name: [(identifier) (nested_identifier)] @name.definition.module) @definition.module

(interface_declaration
  name: (type_identifier) @name.definition.interface) @definition.interface

(type_alias_declaration
  name: (type_identifier) @name.definition.type) @definition.type

(enum_declaration
  name: (identifier) @name.definition.enum) @definition.enum

(type_annotation
  (type_identifier) @name.reference.type)

(generic_type
  name: (type_identifier) @name.reference.type)

(extends_clause
  value: (identifier) @name.reference.class)

(implements_clause
  (type_identifier) @name.reference.implementation)
