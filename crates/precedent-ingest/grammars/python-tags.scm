; Tags for Python (tree-sitter-python 0.25), aider convention:
; @name.definition.<kind> on the defined name, @definition.<kind> on the node,
; @name.reference.<kind> on a referenced name.

(class_definition
  name: (identifier) @name.definition.class) @definition.class

(function_definition
  name: (identifier) @name.definition.function) @definition.function

; Module-level assignments are definitions when they name a constant or a
; type (`MAX_SIZE`, `Pair = namedtuple(...)`, `__all__`); `obj = Foo()` in a
; script is not one.
(module
  (expression_statement
    (assignment
      left: (identifier) @name.definition.constant) @definition.constant)
  (#match? @name.definition.constant "^(_*[A-Z][A-Za-z0-9_]*|__[a-z_]+__)$"))

(call
  function: [
    (identifier) @name.reference.call
    (attribute
      attribute: (identifier) @name.reference.call)
  ]) @reference.call

(attribute
  attribute: (identifier) @name.reference.attribute)

(type
  (identifier) @name.reference.type)

(class_definition
  superclasses: (argument_list
    [
      (identifier) @name.reference.class
      (attribute attribute: (identifier) @name.reference.class)
    ]))

(decorator
  [
    (identifier) @name.reference.call
    (attribute attribute: (identifier) @name.reference.call)
  ])
