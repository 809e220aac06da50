; Tags for Java (tree-sitter-java 0.23), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name.

(class_declaration
  name: (identifier) @name.definition.class) @definition.class

(record_declaration
  name: (identifier) @name.definition.class) @definition.class

(interface_declaration
  name: (identifier) @name.definition.interface) @definition.interface

(annotation_type_declaration
  name: (identifier) @name.definition.interface) @definition.interface

(enum_declaration
  name: (identifier) @name.definition.enum) @definition.enum

(method_declaration
  name: (identifier) @name.definition.method) @definition.method

(constructor_declaration
  name: (identifier) @name.definition.method) @definition.method

(method_invocation
  name: (identifier) @name.reference.call) @reference.call

(object_creation_expression
  type: [
    (type_identifier) @name.reference.class
    (generic_type (type_identifier) @name.reference.class)
  ]) @reference.class

(superclass
  (type_identifier) @name.reference.class)

(type_list
  (type_identifier) @name.reference.implementation)

(type_identifier) @name.reference.type
