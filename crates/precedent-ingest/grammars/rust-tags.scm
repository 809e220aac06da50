; Tags for Rust (tree-sitter-rust 0.24), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name.

(struct_item
  name: (type_identifier) @name.definition.struct) @definition.struct

(enum_item
  name: (type_identifier) @name.definition.enum) @definition.enum

(union_item
  name: (type_identifier) @name.definition.union) @definition.union

(type_item
  name: (type_identifier) @name.definition.type) @definition.type

(function_item
  name: (identifier) @name.definition.function) @definition.function

(function_signature_item
  name: (identifier) @name.definition.function) @definition.function

(trait_item
  name: (type_identifier) @name.definition.trait) @definition.trait

(mod_item
  name: (identifier) @name.definition.module) @definition.module

(macro_definition
  name: (identifier) @name.definition.macro) @definition.macro

(const_item
  name: (identifier) @name.definition.constant) @definition.constant

(static_item
  name: (identifier) @name.definition.constant) @definition.constant

(impl_item
  type: [
    (type_identifier) @name.definition.impl
    (generic_type type: (type_identifier) @name.definition.impl)
    (scoped_type_identifier name: (type_identifier) @name.definition.impl)
  ]) @definition.impl

(call_expression
  function: [
    (identifier) @name.reference.call
    (field_expression field: (field_identifier) @name.reference.call)
    (scoped_identifier name: (identifier) @name.reference.call)
  ]) @reference.call

(macro_invocation
  macro: (identifier) @name.reference.call) @reference.call

(impl_item
  trait: [
    (type_identifier) @name.reference.implementation
    (generic_type type: (type_identifier) @name.reference.implementation)
    (scoped_type_identifier name: (type_identifier) @name.reference.implementation)
  ])

(type_identifier) @name.reference.type
