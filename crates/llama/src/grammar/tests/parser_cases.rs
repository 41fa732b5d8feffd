//! llama.cpp's tests/test-grammar-parser.cpp, case by case (converted from the pinned source):
//! the symbol table in name order and every rule's elements after parsing, and the grammars
//! the parser must refuse.

use super::super::{parse, Element, GreType};
use GreType::*;

#[allow(non_snake_case)]
fn e(ty: GreType, value: u32) -> Element {
    Element::new(ty, value)
}

// llama.cpp's enum names, so the converted cases read as they do upstream
const CHAR: GreType = Char;
const CHAR_NOT: GreType = CharNot;
const CHAR_ALT: GreType = CharAlt;
const CHAR_RNG_UPPER: GreType = CharRngUpper;
const RULE_REF: GreType = RuleRef;
const ALT: GreType = Alt;
const END: GreType = End;
const TOKEN: GreType = Token;
const TOKEN_NOT: GreType = TokenNot;

fn verify_parsing(grammar: &str, expected: &[(&str, u32)], expected_rules: &[Element]) {
    let parsed = parse(grammar, None).unwrap_or_else(|e| panic!("{grammar}: {e}"));
    let symbols: Vec<(&str, u32)> = parsed
        .symbol_ids
        .iter()
        .map(|(k, &v)| (k.as_str(), v))
        .collect();
    assert_eq!(symbols, expected, "symbols of {grammar}");
    let all: Vec<Element> = parsed.rules.iter().flatten().copied().collect();
    assert_eq!(all, expected_rules, "rules of {grammar}");
}

fn verify_failure(grammar: &str) {
    assert!(
        parse(grammar, None).is_err(),
        "should have failed: {grammar}"
    );
}

#[test]
fn llama_cpp_parser_cases() {
    verify_failure(
        r##"
        root ::= "a"{,}"
    "##,
    );

    verify_failure(
        r##"
        root ::= (((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}){0,99}
    "##,
    );

    verify_failure(
        r##"
        root ::= "a"{,10}"
    "##,
    );

    verify_failure(
        r##"
        root ::= "a"{5000}
    "##,
    );

    verify_failure(
        r##"
        root ::= "a"{5000,}
    "##,
    );

    verify_failure(
        r##"
        root ::= "a"{5000,6000}
    "##,
    );

    verify_parsing(
        r##"
        root ::= "a"{0,5000}
    "##,
        &[("root", 0), ("root_1", 1)],
        &[
            // root (index 0)
            e(RULE_REF, /* root_1 */ 1),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root ::= "a"{3,5000}
    "##,
        &[("root", 0), ("root_1", 1)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"
    "##,
        &[("root", 0)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a" | [bdx-z] | [^1-3]
    "##,
        &[("root", 0)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(ALT, 0),
            e(CHAR, 'b' as u32),
            e(CHAR_ALT, 'd' as u32),
            e(CHAR_ALT, 'x' as u32),
            e(CHAR_RNG_UPPER, 'z' as u32),
            e(ALT, 0),
            e(CHAR_NOT, '1' as u32),
            e(CHAR_RNG_UPPER, '3' as u32),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= a+
        a     ::= "a"
    "##,
        &[("a", 1), ("root", 0), ("root_2", 2)],
        &[
            // root (index 0)
            e(RULE_REF, /* a */ 1),
            e(RULE_REF, /* root_2 */ 2),
            e(END, 0),
            // a (index 1)
            e(CHAR, 'a' as u32),
            e(END, 0),
            // root_2 (index 2)
            e(RULE_REF, /* a */ 1),
            e(RULE_REF, /* root_2 */ 2),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"+
    "##,
        &[("root", 0), ("root_1", 1)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= a?
        a     ::= "a"
    "##,
        &[("a", 1), ("root", 0), ("root_2", 2)],
        &[
            // root (index 0)
            e(RULE_REF, /* root_2 */ 2),
            e(END, 0),
            // a (index 1)
            e(CHAR, 'a' as u32),
            e(END, 0),
            // root_2 (index 2)
            e(RULE_REF, /* a */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"?
    "##,
        &[("root", 0), ("root_1", 1)],
        &[
            // root (index 0)
            e(RULE_REF, /* root_1 */ 1),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= a*
        a     ::= "a"
    "##,
        &[("a", 1), ("root", 0), ("root_2", 2)],
        &[
            // root (index 0)
            e(RULE_REF, /* root_2 */ 2),
            e(END, 0),
            // a (index 1)
            e(CHAR, 'a' as u32),
            e(END, 0),
            // root_2 (index 2)
            e(RULE_REF, /* a */ 1),
            e(RULE_REF, /* root_2 */ 2),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"*
    "##,
        &[("root", 0), ("root_1", 1)],
        &[
            // root (index 0)
            e(RULE_REF, /* root_1 */ 1),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"{2}
    "##,
        &[("root", 0)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"{2,}
    "##,
        &[("root", 0), ("root_1", 1)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"{ 4}
    "##,
        &[("root", 0)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= "a"{2,4}
    "##,
        &[("root", 0), ("root_1", 1), ("root_2", 2)],
        &[
            // root (index 0)
            e(CHAR, 'a' as u32),
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_2 */ 2),
            e(END, 0),
            // root_1 (index 1)
            e(CHAR, 'a' as u32),
            e(ALT, 0),
            e(END, 0),
            // root_2 (index 2)
            e(CHAR, 'a' as u32),
            e(RULE_REF, /* root_1 */ 1),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= (expr "=" term "\n")+
        expr  ::= term ([-+*/] term)*
        term  ::= [0-9]+
    "##,
        &[
            ("expr", 2),
            ("expr_5", 5),
            ("expr_6", 6),
            ("root", 0),
            ("root_1", 1),
            ("root_4", 4),
            ("term", 3),
            ("term_7", 7),
        ],
        &[
            // root (index 0)
            e(RULE_REF, /* root_1 */ 1),
            e(RULE_REF, /* root_4 */ 4),
            e(END, 0),
            // root_1 (index 1)
            e(RULE_REF, /* expr */ 2),
            e(CHAR, '=' as u32),
            e(RULE_REF, /* term */ 3),
            e(CHAR, '\n' as u32),
            e(END, 0),
            // expr (index 2)
            e(RULE_REF, /* term */ 3),
            e(RULE_REF, /* expr_6 */ 6),
            e(END, 0),
            // term (index 3)
            e(CHAR, '0' as u32),
            e(CHAR_RNG_UPPER, '9' as u32),
            e(RULE_REF, /* term_7 */ 7),
            e(END, 0),
            // root_4 (index 4)
            e(RULE_REF, /* root_1 */ 1),
            e(RULE_REF, /* root_4 */ 4),
            e(ALT, 0),
            e(END, 0),
            // expr_5 (index 5)
            e(CHAR, '-' as u32),
            e(CHAR_ALT, '+' as u32),
            e(CHAR_ALT, '*' as u32),
            e(CHAR_ALT, '/' as u32),
            e(RULE_REF, /* term */ 3),
            e(END, 0),
            // expr_6 (index 6)
            e(RULE_REF, /* expr_5 */ 5),
            e(RULE_REF, /* expr_6 */ 6),
            e(ALT, 0),
            e(END, 0),
            // term_7 (index 7)
            e(CHAR, '0' as u32),
            e(CHAR_RNG_UPPER, '9' as u32),
            e(RULE_REF, /* term_7 */ 7),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    verify_parsing(
        r##"
        root  ::= (expr "=" ws term "\n")+
        expr  ::= term ([-+*/] term)*
        term  ::= ident | num | "(" ws expr ")" ws
        ident ::= [a-z] [a-z0-9_]* ws
        num   ::= [0-9]+ ws
        ws    ::= [ \t\n]*
    "##,
        &[
            ("expr", 2),
            ("expr_6", 6),
            ("expr_7", 7),
            ("ident", 8),
            ("ident_10", 10),
            ("num", 9),
            ("num_11", 11),
            ("root", 0),
            ("root_1", 1),
            ("root_5", 5),
            ("term", 4),
            ("ws", 3),
            ("ws_12", 12),
        ],
        &[
            // root (index 0)
            e(RULE_REF, /* root_1 */ 1),
            e(RULE_REF, /* root_5 */ 5),
            e(END, 0),
            // root_1 (index 1)
            e(RULE_REF, /* expr */ 2),
            e(CHAR, '=' as u32),
            e(RULE_REF, /* ws */ 3),
            e(RULE_REF, /* term */ 4),
            e(CHAR, '\n' as u32),
            e(END, 0),
            // expr (index 2)
            e(RULE_REF, /* term */ 4),
            e(RULE_REF, /* expr_7 */ 7),
            e(END, 0),
            // ws (index 3)
            e(RULE_REF, /* ws_12 */ 12),
            e(END, 0),
            // term (index 4)
            e(RULE_REF, /* ident */ 8),
            e(ALT, 0),
            e(RULE_REF, /* num */ 9),
            e(ALT, 0),
            e(CHAR, '(' as u32),
            e(RULE_REF, /* ws */ 3),
            e(RULE_REF, /* expr */ 2),
            e(CHAR, ')' as u32),
            e(RULE_REF, /* ws */ 3),
            e(END, 0),
            // root_5 (index 5)
            e(RULE_REF, /* root_1 */ 1),
            e(RULE_REF, /* root_5 */ 5),
            e(ALT, 0),
            e(END, 0),
            // expr_6 (index 6)
            e(CHAR, '-' as u32),
            e(CHAR_ALT, '+' as u32),
            e(CHAR_ALT, '*' as u32),
            e(CHAR_ALT, '/' as u32),
            e(RULE_REF, /* term */ 4),
            e(END, 0),
            // expr_7 (index 7)
            e(RULE_REF, /* expr_6 */ 6),
            e(RULE_REF, /* expr_7 */ 7),
            e(ALT, 0),
            e(END, 0),
            // ident (index 8)
            e(CHAR, 'a' as u32),
            e(CHAR_RNG_UPPER, 'z' as u32),
            e(RULE_REF, /* ident_10 */ 10),
            e(RULE_REF, /* ws */ 3),
            e(END, 0),
            // num (index 9)
            e(CHAR, '0' as u32),
            e(CHAR_RNG_UPPER, '9' as u32),
            e(RULE_REF, /* num_11 */ 11),
            e(RULE_REF, /* ws */ 3),
            e(END, 0),
            // ident_10 (index 10)
            e(CHAR, 'a' as u32),
            e(CHAR_RNG_UPPER, 'z' as u32),
            e(CHAR_ALT, '0' as u32),
            e(CHAR_RNG_UPPER, '9' as u32),
            e(CHAR_ALT, '_' as u32),
            e(RULE_REF, /* ident_10 */ 10),
            e(ALT, 0),
            e(END, 0),
            // num_11 (index 11)
            e(CHAR, '0' as u32),
            e(CHAR_RNG_UPPER, '9' as u32),
            e(RULE_REF, /* num_11 */ 11),
            e(ALT, 0),
            e(END, 0),
            // ws_12 (index 12)
            e(CHAR, ' ' as u32),
            e(CHAR_ALT, '\t' as u32),
            e(CHAR_ALT, '\n' as u32),
            e(RULE_REF, /* ws_12 */ 12),
            e(ALT, 0),
            e(END, 0),
        ],
    );

    // <[1000]> = "<think>"
    // <[1001]> = "</think>"
    verify_parsing(
        r##"
        root  ::= <[1000]> !<[1001]> <[1001]>
    "##,
        &[("root", 0)],
        &[
            // root (index 0)
            e(TOKEN, 1000),
            e(TOKEN_NOT, 1001),
            e(TOKEN, 1001),
            e(END, 0),
        ],
    );
}
