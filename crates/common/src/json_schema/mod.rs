//! JSON schema to GBNF (llama.cpp's common/json-schema-to-grammar.cpp with the schema reader of
//! common/json-schema.cpp): what `-j` / `-jf` turn into a grammar.

mod converter;
mod int_range;
mod pattern;
mod schema;
mod value;

#[cfg(test)]
mod tests;

pub use converter::format_literal as gbnf_format_literal;
pub use schema::{schema_from_json, Document, Property, Schema, StringFormat};
pub use value::Json;

/// `json_schema_to_grammar(schema, force_gbnf)`: the grammar text, rules in name order. No
/// llguidance here, so `force_gbnf` changes nothing. Errors read "JSON schema conversion
/// failed:\n..." as llama.cpp's do; parts it cannot express are warned about on stderr.
pub fn json_schema_to_grammar(schema: &Json, _force_gbnf: bool) -> Result<String, String> {
    let doc =
        schema_from_json(schema).map_err(|e| format!("JSON schema conversion failed:\n{e}"))?;
    document_to_grammar(&doc)
}

/// `json_schema_to_grammar(document)`.
pub fn document_to_grammar(doc: &Document) -> Result<String, String> {
    let mut c = converter::Converter::new(doc, false);
    c.visit(&doc.root, "");
    c.check_errors()?;
    Ok(c.format_grammar())
}

/// Parse the schema text and convert it: what `-j` does with its argument. A parse error is
/// serde_json's message.
pub fn json_schema_text_to_grammar(text: &str) -> Result<String, String> {
    let v = Json::parse(text).map_err(|e| e.to_string())?;
    json_schema_to_grammar(&v, false)
}
