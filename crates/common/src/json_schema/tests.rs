//! llama.cpp's tests/test-json-schema-to-grammar.cpp: every case's schema converts to exactly
//! the expected grammar (compared as llama.cpp compares: lines trimmed), the expected failures
//! fail, and every expected grammar parses with a root rule.

use std::path::PathBuf;

use super::*;

fn cases() -> Vec<serde_json::Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/grammars/json-schema-cases.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

/// llama.cpp's `trim`: outer whitespace off, and the leading blanks of every line.
fn trim(s: &str) -> String {
    s.trim_matches([' ', '\n', '\r', '\t'])
        .split('\n')
        .map(|l| l.trim_start_matches([' ', '\t']))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn llama_cpp_conversion_cases() {
    let cases = cases();
    assert_eq!(cases.len(), 81);
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let schema = Json::parse(case["schema"].as_str().unwrap()).unwrap();
        let result = json_schema_to_grammar(&schema, true);
        match (case["status"].as_str().unwrap(), result) {
            ("SUCCESS", Ok(g)) => {
                let want = trim(case["grammar"].as_str().unwrap());
                if trim(&g) != want {
                    failures.push(format!(
                        "{name}:\n# EXPECTED:\n{want}\n# ACTUAL:\n{}",
                        trim(&g)
                    ));
                }
            }
            ("FAILURE", Err(_)) => {}
            (status, r) => failures.push(format!("{name}: expected {status}, got {r:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn expected_grammars_parse() {
    for case in cases() {
        if case["status"] == "SUCCESS" {
            let g = case["grammar"].as_str().unwrap();
            let p =
                llama::grammar::parse(g, None).unwrap_or_else(|e| panic!("{}: {e}", case["name"]));
            assert!(p.symbol_ids.contains_key("root"), "{}", case["name"]);
        }
    }
}

#[test]
fn a_recursive_document_converts_as_its_json() {
    let schema = Json::parse(
        r##"{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
            "properties": {"next": {"$ref": "#/$defs/node"}, "leaf": {}},
            "additionalProperties": false}}}"##,
    )
    .unwrap();
    let doc = schema_from_json(&schema).unwrap();
    assert_eq!(
        document_to_grammar(&doc),
        json_schema_to_grammar(&schema, true)
    );
}

#[test]
fn the_issue_schema_gives_an_object_with_an_integer_answer() {
    let g = json_schema_text_to_grammar(
        r#"{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}"#,
    )
    .unwrap();
    assert_eq!(
        g,
        "answer-kv ::= \"\\\"answer\\\"\" space \":\" space integer\n\
         integer ::= (\"-\"? integral-part)\n\
         integral-part ::= [0] | [1-9] [0-9]{0,15}\n\
         root ::= \"{\" space answer-kv space \"}\"\n\
         space ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
    );
}

#[test]
fn bad_schemas_fail_with_llama_cpp_messages() {
    assert_eq!(
        json_schema_text_to_grammar(r#"{"type": "foo"}"#).unwrap_err(),
        "JSON schema conversion failed:\nJSON schema error at #: unrecognized type foo"
    );
    assert!(json_schema_text_to_grammar("{not json").is_err());
    assert_eq!(
        json_schema_text_to_grammar(r##"{"$ref": "#/nope"}"##).unwrap_err(),
        "JSON schema conversion failed:\nJSON schema error at #: cannot resolve $ref #/nope, nope not found"
    );
    // a long $ref chain is refused, not a stack overflow
    let mut defs = String::new();
    for i in 0..2000 {
        defs.push_str(&format!("\"d{i}\": {{\"$ref\": \"#/$defs/d{}\"}},", i + 1));
    }
    defs.push_str("\"d2000\": {\"type\": \"integer\"}");
    let schema = format!("{{\"$ref\": \"#/$defs/d0\", \"$defs\": {{{defs}}}}}");
    assert!(json_schema_text_to_grammar(&schema).is_err());
}

/// llama.cpp's test-grammar-integration.cpp `test_schema` cases: the converted grammar accepts
/// the valid documents and refuses the others, one code point at a time.
#[test]
fn llama_cpp_integration_schema_cases() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/grammars/integration-cases.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let matches = |g: &llama::grammar::Grammar, items: &[serde_json::Value]| {
        let mut g = g.clone();
        for item in items {
            let text = item.as_str().expect("schema cases are text only");
            for c in text.chars() {
                let piece = c.to_string();
                if g.accept_token(0, piece.as_bytes()).is_err() || g.stacks().is_empty() {
                    return false;
                }
            }
        }
        g.can_end()
    };
    let mut n = 0;
    for case in v["cases"].as_array().unwrap() {
        if case["kind"] != "schema" {
            continue;
        }
        let desc = case["desc"].as_str().unwrap();
        let schema = Json::parse(case["text"].as_str().unwrap()).unwrap();
        let gbnf = json_schema_to_grammar(&schema, true).unwrap_or_else(|e| panic!("{desc}: {e}"));
        let g = llama::grammar::Grammar::new(None, &gbnf, "root", false, &[], &[])
            .unwrap_or_else(|e| panic!("{desc}: {e}"));
        for s in case["passing"].as_array().unwrap() {
            assert!(
                matches(&g, s.as_array().unwrap()),
                "{desc}: should match {s}"
            );
        }
        for s in case["failing"].as_array().unwrap() {
            assert!(
                !matches(&g, s.as_array().unwrap()),
                "{desc}: should not match {s}"
            );
        }
        n += 1;
    }
    assert_eq!(n, 33);
}

/// Random schemas from JSON schema's keywords: conversion never panics, and what it produces
/// is a grammar llama's parser reads (or refuses with an error, for huge repetitions).
#[test]
fn random_schemas_neither_panic_nor_produce_garbage() {
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    fn schema(next: &mut dyn FnMut() -> u64, depth: u32) -> String {
        let leaf = [
            r##"{"type":"integer","minimum":-15,"maximum":1234}"##,
            r##"{"type":"integer","exclusiveMinimum":7.5}"##,
            r##"{"type":"integer","maximum":-3}"##,
            r##"{"type":"string","pattern":"^a[bc]{1,3}(d|e)*\\.$"}"##,
            r##"{"type":"string","pattern":"^(?=x)$"}"##,
            r##"{"type":"string","pattern":"^(a$"}"##,
            r##"{"type":"string","format":"date-time"}"##,
            r##"{"type":"string","minLength":2,"maxLength":4}"##,
            r##"{"enum":["a",1,null,2.5,{"k":[true]}]}"##,
            r##"{"const":"x\"y"}"##,
            r##"{"type":["number","null"]}"##,
            r##"{"$ref":"#/$defs/d"}"##,
            r##"{"$ref":"#/nowhere"}"##,
            r##"{}"##,
            r##"{"type":"bogus"}"##,
            r##"{"type":"boolean"}"##,
        ];
        if depth == 0 || next() % 3 == 1 {
            return leaf[(next() % leaf.len() as u64) as usize].to_string();
        }
        let a = schema(next, depth - 1);
        let b = schema(next, depth - 1);
        match next() % 6 {
            0 => format!(
                r##"{{"type":"object","properties":{{"p q":{a},"r":{b}}},"required":["r"],"additionalProperties":{b}}}"##
            ),
            1 => format!(r##"{{"type":"array","items":{a},"minItems":1,"maxItems":3}}"##),
            2 => format!(r##"{{"anyOf":[{a},{b}]}}"##),
            3 => format!(r##"{{"allOf":[{a},{b}]}}"##),
            4 => format!(r##"{{"prefixItems":[{a},{b}]}}"##),
            _ => format!(
                r##"{{"type":"object","properties":{{"a":{a}}},"additionalProperties":false}}"##
            ),
        }
    }
    let mut converted = 0;
    for _ in 0..600 {
        let body = schema(&mut next, 3);
        let text = format!(
            r##"{{"$defs":{{"d":{{"type":"object","properties":{{"n":{{"$ref":"#/$defs/d"}}}}}}}},"allOf":[{body}]}}"##
        );
        let Ok(g) = json_schema_text_to_grammar(&text) else {
            continue;
        };
        converted += 1;
        llama::grammar::Grammar::new(None, &g, "root", false, &[], &[])
            .unwrap_or_else(|e| panic!("{text}\n{g}\n{e}"));
    }
    assert!(converted > 100, "only {converted} converted");
}

#[test]
fn property_names_with_class_characters_give_a_grammar_that_builds() {
    // found by the grammar fuzz target: llama.cpp writes `]` and `\` of a property name into
    // the additional-key character classes as they are, and its grammar does not parse
    let text = r#"{"type": "object", "properties": {"a]b": {"type": "integer"}, "c\\d": {"type": "string"}}, "additionalProperties": true}"#;
    let g = json_schema_text_to_grammar(text).unwrap();
    assert!(g.contains(r"[\]]"), "{g}");
    llama::grammar::Grammar::new(None, &g, "root", false, &[], &[])
        .unwrap_or_else(|e| panic!("{g}\n{e}"));
}
