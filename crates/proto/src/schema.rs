//! The shape of the generated protobuf field tables (`generated_schema.rs`) that the
//! unknown-field scan reads.

/// What a known field contains.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FieldShape {
    /// A scalar, a string, bytes, or a map without messages: nothing to scan inside.
    Scalar,
    /// A message, repeated or not: index of its schema in `SCHEMA`.
    Message(usize),
    /// A `map<string, Message>`: index of the value's schema.
    MapOfMessages(usize),
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct SchemaField {
    pub(crate) tag: u32,
    /// JSON name; empty for a `json:",inline"` field.
    pub(crate) json: &'static str,
    pub(crate) shape: FieldShape,
    /// A list: elements are rendered with their index in error paths.
    pub(crate) repeated: bool,
}

/// The fields of one message.
#[derive(Debug)]
pub(crate) struct MsgSchema {
    #[allow(dead_code)] // documents the table; shown by Debug
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [SchemaField],
}
