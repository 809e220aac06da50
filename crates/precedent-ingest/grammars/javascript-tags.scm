; Tags for JavaScript (tree-sitter-javascript 0.25), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name. Also the base of typescript-tags.scm.

(method_definition
  name: [(property_identifier) (private_property_identifier)] @name.definition.method) @definition.method

(class
  name: (_) @name.definition.class) @definition.class

(class_declaration
  name: (_) @name.definition.class) @definition.class

(function_expression
  name: (identifier) @name.definition.function) @definition.function

(function_declaration
  name: (identifier) @name.definition.function) @definition.function

(generator_function
  name: (identifier) @name.definition.function) @definition.function

(generator_function_declaration
  name: (identifier) @name.definition.function) @definition.function

(lexical_declaration
  (variable_declarator
    name: (identifier) @name.definition.function
    value: [(arrow_function) (function_expression)]) @definition.function)

(variable_declaration
  (variable_declarator
    name: (identifier) @name.definition.function
    value: [(arrow_function) (function_expression)]) @definition.function)

(assignment_expression
  left: [
    (identifier) @name.definition.function
    (member_expression
      property: (property_identifier) @name.definition.function)
  ]
  right: [(arrow_function) (function_expression)]) @definition.function

(pair
  key: (property_identifier) @name.definition.function
  value: [(arrow_function) (function_expression)]) @definition.function

(
  (call_expression
    function: (identifier) @name.reference.call) @reference.call
  (#not-match? @name.reference.call "^(require)$")
)

(call_expression
  function: (member_expression
    property: (property_identifier) @name.reference.call)) @reference.call

(new_expression
  constructor: (identifier) @name.reference.class) @reference.class

; @javascript-only: the patterns below are not shared with typescript-tags.scm.

(class_heritage
  (identifier) @name.reference.class)
