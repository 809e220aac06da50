; Tags for Go (tree-sitter-go 0.25), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name.

(function_declaration
  name: (identifier) @name.definition.function) @definition.function

(method_declaration
  name: (field_identifier) @name.definition.method) @definition.method

(type_declaration
  (type_spec
    name: (type_identifier) @name.definition.struct
    type: (struct_type)) @definition.struct)

(type_declaration
  (type_spec
    name: (type_identifier) @name.definition.interface
    type: (interface_type)) @definition.interface)

(type_declaration
  (type_spec
    name: (type_identifier) @name.definition.type
    type: [
      (type_identifier) (qualified_type) (pointer_type) (slice_type) (map_type)
      (array_type) (function_type) (channel_type) (generic_type)
    ]) @definition.type)

(const_declaration
  (const_spec
    name: (identifier) @name.definition.constant) @definition.constant)

(call_expression
  function: [
    (identifier) @name.reference.call
    (parenthesized_expression (identifier) @name.reference.call)
    (selector_expression field: (field_identifier) @name.reference.call)
    (parenthesized_expression (selector_expression field: (field_identifier) @name.reference.call))
  ]) @reference.call

(type_identifier) @name.reference.type
