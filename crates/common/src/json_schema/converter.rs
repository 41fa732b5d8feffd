//! `common_chat_schema_converter`: the schema tree to GBNF rules, named after their place in
//! the schema, with llama.cpp's primitive rules, object layout (required keys in order, then
//! optional ones as nested "-rest" rules), and its errors and warnings.

use std::collections::{BTreeMap, HashSet};

use super::int_range::{build_min_max_int, build_repetition};
use super::schema::{Document, Property, Schema, StringFormat};
use super::value::Json;

/// How many `$ref`s may be being resolved inside each other (llama.cpp has no limit and
/// overflows its stack on a long enough chain).
pub(crate) const MAX_REF_DEPTH: usize = 256;

pub(crate) const SPACE_RULE: &str = "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}";

/// `PRIMITIVE_RULES`: (content, dependencies).
pub(crate) fn primitive(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match name {
        "boolean" => ("(\"true\" | \"false\")", &[]),
        "decimal-part" => ("[0-9]{1,16}", &[]),
        "integral-part" => ("[0] | [1-9] [0-9]{0,15}", &[]),
        "number" => (
            "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?",
            &["integral-part", "decimal-part"],
        ),
        "integer" => ("(\"-\"? integral-part)", &["integral-part"]),
        "value" => (
            "object | array | string | number | boolean | null",
            &["object", "array", "string", "number", "boolean", "null"],
        ),
        "object" => (
            "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? space \"}\"",
            &["string", "value"],
        ),
        "array" => (
            "\"[\" space ( value (\",\" space value)* )? space \"]\"",
            &["value"],
        ),
        "uuid" => (
            "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12} \"\\\"\"",
            &[],
        ),
        "char" => (
            "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})",
            &[],
        ),
        "string" => ("\"\\\"\" char* \"\\\"\"", &["char"]),
        "null" => ("\"null\"", &[]),
        _ => return None,
    })
}

/// `STRING_FORMAT_RULES`.
pub(crate) fn string_format(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match name {
        "date" => ("[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", &[]),
        "time" => ("([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | \"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", &[]),
        "date-time" => ("date \"T\" time", &["date", "time"]),
        "date-string" => ("\"\\\"\" date \"\\\"\"", &["date"]),
        "time-string" => ("\"\\\"\" time \"\\\"\"", &["time"]),
        "date-time-string" => ("\"\\\"\" date-time \"\\\"\"", &["date-time"]),
        _ => return None,
    })
}

fn is_reserved_name(name: &str) -> bool {
    name == "root" || primitive(name).is_some() || string_format(name).is_some()
}

/// Runs of characters other than letters, digits and '-' become one '-'.
fn escape_rule_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('-');
            in_run = true;
        }
    }
    out
}

/// `format_literal`: a GBNF string literal.
pub fn format_literal(literal: &str) -> String {
    let mut out = String::with_capacity(literal.len() + 2);
    out.push('"');
    for c in literal.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) struct Converter<'d> {
    pub(crate) dotall: bool,
    pub(crate) rules: BTreeMap<String, String>,
    refs_being_resolved: HashSet<String>,
    pub(crate) errors: Vec<String>,
    pub(crate) warnings: Vec<String>,
    doc: &'d Document,
}

impl<'d> Converter<'d> {
    pub(crate) fn new(doc: &'d Document, dotall: bool) -> Self {
        let mut rules = BTreeMap::new();
        rules.insert("space".to_string(), SPACE_RULE.to_string());
        Converter {
            dotall,
            rules,
            refs_being_resolved: HashSet::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            doc,
        }
    }

    /// `_add_rule`: the name for `rule`, numbered when the name is taken by another rule.
    pub(crate) fn add_rule(&mut self, name: &str, rule: &str) -> String {
        let esc = escape_rule_name(name);
        if self.rules.get(&esc).map(|r| r == rule) != Some(false) {
            self.rules.insert(esc.clone(), rule.to_string());
            return esc;
        }
        let mut i = 0;
        while self
            .rules
            .get(&format!("{esc}{i}"))
            .is_some_and(|r| r != rule)
        {
            i += 1;
        }
        let key = format!("{esc}{i}");
        self.rules.insert(key.clone(), rule.to_string());
        key
    }

    pub(crate) fn add_primitive(
        &mut self,
        name: &str,
        rule: (&'static str, &'static [&'static str]),
    ) -> String {
        let n = self.add_rule(name, rule.0);
        for dep in rule.1 {
            let Some(dep_rule) = primitive(dep).or_else(|| string_format(dep)) else {
                self.errors.push(format!("Rule {dep} not known"));
                continue;
            };
            if !self.rules.contains_key(*dep) {
                self.add_primitive(dep, dep_rule);
            }
        }
        n
    }

    fn add_named_primitive(&mut self, name: &str) -> String {
        let rule = primitive(name).or_else(|| string_format(name));
        match rule {
            Some(r) => self.add_primitive(name, r),
            None => {
                self.errors.push(format!("Rule {name} not known"));
                String::new()
            }
        }
    }

    fn generate_union_rule(&mut self, name: &str, alts: &[Schema]) -> String {
        let mut rules = Vec::with_capacity(alts.len());
        for (i, alt) in alts.iter().enumerate() {
            let sep = if name.is_empty() { "alternative-" } else { "-" };
            rules.push(self.visit(alt, &format!("{name}{sep}{i}")));
        }
        rules.join(" | ")
    }

    /// `_not_strings`: a JSON string that is none of `strings`, walking their trie.
    fn not_strings(&mut self, strings: &[String]) -> String {
        struct Node {
            children: BTreeMap<u32, usize>,
            pattern: i32,
        }
        let mut nodes = vec![Node {
            children: BTreeMap::new(),
            pattern: -1,
        }];
        for (n, w) in strings.iter().enumerate() {
            let mut cur = 0;
            for c in w.chars() {
                let next = nodes.len();
                cur = *nodes[cur].children.entry(c as u32).or_insert(next);
                if cur == next {
                    nodes.push(Node {
                        children: BTreeMap::new(),
                        pattern: -1,
                    });
                }
            }
            if nodes[cur].pattern < 0 {
                nodes[cur].pattern = n as i32;
            }
        }
        let char_rule = self.add_named_primitive("char");
        let mut out = String::from("[\"] ( ");
        // llama.cpp recurses once a character; a long property name would overflow the stack,
        // so the walk keeps its own stack of (node, next child, characters seen)
        let mut stack: Vec<(usize, usize, String)> = vec![(0, 0, String::new())];
        while let Some((idx, next, rejects)) = stack.last_mut() {
            let node = &nodes[*idx];
            if let Some((&cpt, &child)) = node.children.iter().nth(*next) {
                let c = char::from_u32(cpt).unwrap_or('\u{FFFD}');
                rejects.push(c);
                if *next > 0 {
                    out.push_str(" | ");
                }
                *next += 1;
                out.push('[');
                push_class_char(&mut out, c);
                out.push(']');
                if !nodes[child].children.is_empty() {
                    out.push_str(" (");
                    stack.push((child, 0, String::new()));
                } else {
                    out.push(' ');
                    out.push_str(&char_rule);
                    out.push('+');
                }
                continue;
            }
            if !node.children.is_empty() {
                out.push_str(" | [^\"");
                for c in rejects.chars() {
                    push_class_char(&mut out, c);
                }
                out.push_str("] ");
                out.push_str(&char_rule);
                out.push('*');
            }
            stack.pop();
            if !stack.is_empty() {
                out.push(')');
            }
        }
        out.push_str(" )");
        if nodes[0].pattern < 0 {
            out.push('?');
        }
        out.push_str(" [\"]");
        out
    }

    fn resolve_ref(&mut self, r: &str) -> String {
        let fragment = match r.find('#') {
            Some(i) => &r[i + 1..],
            None => r,
        };
        let mut ref_name = format!("ref{}", escape_rule_name(fragment));
        if !self.rules.contains_key(&ref_name) && !self.refs_being_resolved.contains(r) {
            let doc = self.doc;
            let Some(target) = doc.refs.get(r) else {
                self.errors.push(format!("Unresolved $ref {r}"));
                return String::new();
            };
            if self.refs_being_resolved.len() >= MAX_REF_DEPTH {
                self.errors
                    .push(format!("$ref {r} is nested more than {MAX_REF_DEPTH} deep"));
                return String::new();
            }
            self.refs_being_resolved.insert(r.to_string());
            ref_name = self.visit(target, &ref_name);
            self.refs_being_resolved.remove(r);
        }
        ref_name
    }

    fn build_object_rule(
        &mut self,
        properties: &[(&str, &Schema)],
        required: &HashSet<&str>,
        name: &str,
        additional: Option<&Schema>,
    ) -> String {
        let dash = if name.is_empty() { "" } else { "-" };
        let mut required_props: Vec<String> = Vec::new();
        let mut optional_props: Vec<String> = Vec::new();
        let mut kv_rule_names: BTreeMap<String, String> = BTreeMap::new();
        let mut prop_names: Vec<String> = Vec::new();
        for &(prop_name, prop_schema) in properties {
            let prop_rule_name = self.visit(prop_schema, &format!("{name}{dash}{prop_name}"));
            let kv = self.add_rule(
                &format!("{name}{dash}{prop_name}-kv"),
                &format!(
                    "{} space \":\" space {prop_rule_name}",
                    format_literal(&Json::Str(prop_name.to_string()).dump())
                ),
            );
            kv_rule_names.insert(prop_name.to_string(), kv);
            if required.contains(prop_name) {
                required_props.push(prop_name.to_string());
            } else {
                optional_props.push(prop_name.to_string());
            }
            prop_names.push(prop_name.to_string());
        }
        if let Some(additional) = additional {
            let sub_name = format!("{name}{dash}additional");
            let value_rule = if *additional != Schema::Any {
                self.visit(additional, &format!("{sub_name}-value"))
            } else {
                self.add_named_primitive("value")
            };
            let key_rule = if prop_names.is_empty() {
                self.add_named_primitive("string")
            } else {
                let rule = self.not_strings(&prop_names);
                self.add_rule(&format!("{sub_name}-k"), &rule)
            };
            let kv = self.add_rule(
                &format!("{sub_name}-kv"),
                &format!("{key_rule} \":\" space {value_rule}"),
            );
            kv_rule_names.insert("*".into(), kv);
            optional_props.push("*".into());
        }

        if required_props.is_empty() && optional_props.is_empty() {
            return "\"{\" space \"}\"".into();
        }
        let mut rule = String::from("\"{\" space ");
        for (i, p) in required_props.iter().enumerate() {
            if i > 0 {
                rule.push_str(" \",\" space ");
            }
            rule.push_str(&kv_rule_names[p]);
        }
        if !optional_props.is_empty() {
            rule.push_str(" (");
            if !required_props.is_empty() {
                rule.push_str(" \",\" space ( ");
            }
            for i in 0..optional_props.len() {
                if i > 0 {
                    rule.push_str(" | ");
                }
                let refs = self.recursive_refs(&optional_props[i..], false, name, &kv_rule_names);
                rule.push_str(&refs);
            }
            if !required_props.is_empty() {
                rule.push_str(" )");
            }
            rule.push_str(" )?");
        }
        rule.push_str(" space \"}\"");
        rule
    }

    fn recursive_refs(
        &mut self,
        ks: &[String],
        first_is_optional: bool,
        name: &str,
        kv_rule_names: &BTreeMap<String, String>,
    ) -> String {
        let Some(k) = ks.first() else {
            return String::new();
        };
        let kv = &kv_rule_names[k];
        let comma_ref = format!("( \",\" space {kv} )");
        let mut res = if first_is_optional {
            format!("{comma_ref}{}", if k == "*" { "*" } else { "?" })
        } else if k == "*" {
            format!("{kv} {comma_ref}*")
        } else {
            kv.clone()
        };
        if ks.len() > 1 {
            let rest = self.recursive_refs(&ks[1..], true, name, kv_rule_names);
            let dash = if name.is_empty() { "" } else { "-" };
            let rest_name = self.add_rule(&format!("{name}{dash}{k}-rest"), &rest);
            res.push(' ');
            res.push_str(&rest_name);
        }
        res
    }

    fn visit_primitive(&mut self, rule_name: &str, ty: &str) -> String {
        let name = if rule_name == "root" { "root" } else { ty };
        match primitive(ty) {
            Some(r) => self.add_primitive(name, r),
            None => String::new(),
        }
    }

    fn visit_all_of(&mut self, children: &[Schema], name: &str, rule_name: &str) -> String {
        let mut required: HashSet<&str> = HashSet::new();
        let mut properties: Vec<(&str, &Schema)> = Vec::new();
        let mut enum_values: BTreeMap<String, usize> = BTreeMap::new();
        let doc = self.doc;
        fn add_component<'s>(
            doc: &'s Document,
            comp: &'s Schema,
            is_required: bool,
            required: &mut HashSet<&'s str>,
            properties: &mut Vec<(&'s str, &'s Schema)>,
            enum_values: &mut BTreeMap<String, usize>,
            depth: usize,
        ) {
            match comp {
                // a $ref cycle through allOf would recurse forever in llama.cpp
                Schema::Ref(r) if depth < 64 => {
                    if let Some(t) = doc.refs.get(r) {
                        add_component(
                            doc,
                            t,
                            is_required,
                            required,
                            properties,
                            enum_values,
                            depth + 1,
                        );
                    }
                }
                Schema::Object { properties: ps, .. } => {
                    for Property { name, schema, .. } in ps {
                        properties.push((name, schema));
                        if is_required {
                            required.insert(name);
                        }
                    }
                }
                Schema::Enum(values) => {
                    for v in values {
                        *enum_values.entry(format_literal(&v.dump())).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        for child in children {
            if let Schema::AnyOf(alts) = child {
                for alt in alts {
                    add_component(
                        doc,
                        alt,
                        false,
                        &mut required,
                        &mut properties,
                        &mut enum_values,
                        0,
                    );
                }
            } else {
                add_component(
                    doc,
                    child,
                    true,
                    &mut required,
                    &mut properties,
                    &mut enum_values,
                    0,
                );
            }
        }
        if !enum_values.is_empty() {
            let inter: Vec<&str> = enum_values
                .iter()
                .filter(|(_, &n)| n == children.len())
                .map(|(k, _)| k.as_str())
                .collect();
            if !inter.is_empty() {
                let rule = format!("({})", inter.join(" | "));
                return self.add_rule(rule_name, &rule);
            }
        }
        let rule = self.build_object_rule(&properties, &required, name, None);
        self.add_rule(rule_name, &rule)
    }

    pub(crate) fn visit(&mut self, schema: &Schema, name: &str) -> String {
        let rule_name = if is_reserved_name(name) {
            format!("{name}-")
        } else if name.is_empty() {
            "root".to_string()
        } else {
            name.to_string()
        };
        let sub_name = if name.is_empty() {
            String::new()
        } else {
            format!("{name}-")
        };
        match schema {
            Schema::Ref(r) => {
                let target = self.resolve_ref(r);
                self.add_rule(&rule_name, &target)
            }
            Schema::AnyOf(alts) => {
                let rule = self.generate_union_rule(name, alts);
                self.add_rule(&rule_name, &rule)
            }
            Schema::AllOf(children) => self.visit_all_of(children, name, &rule_name),
            Schema::Const(v) => self.add_rule(&rule_name, &format_literal(&v.dump())),
            Schema::Enum(values) => {
                let alts: Vec<String> = values.iter().map(|v| format_literal(&v.dump())).collect();
                self.add_rule(&rule_name, &format!("({})", alts.join(" | ")))
            }
            Schema::Object {
                properties,
                additional,
            } => {
                if properties.is_empty() && additional.as_deref() == Some(&Schema::Any) {
                    let obj = self.add_named_primitive("object");
                    return self.add_rule(&rule_name, &obj);
                }
                let props: Vec<(&str, &Schema)> = properties
                    .iter()
                    .map(|p| (p.name.as_str(), &p.schema))
                    .collect();
                let required: HashSet<&str> = properties
                    .iter()
                    .filter(|p| p.required)
                    .map(|p| p.name.as_str())
                    .collect();
                let rule = self.build_object_rule(&props, &required, name, additional.as_deref());
                self.add_rule(&rule_name, &rule)
            }
            Schema::Tuple(items) => {
                let mut rule = String::from("\"[\" space ");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        rule.push_str(" \",\" space ");
                    }
                    rule.push_str(&self.visit(item, &format!("{sub_name}tuple-{i}")));
                }
                rule.push_str(" space \"]\"");
                self.add_rule(&rule_name, &rule)
            }
            Schema::Array {
                items,
                min_items,
                max_items,
            } => {
                if **items == Schema::Any && *min_items == 0 && *max_items < 0 {
                    return self.visit_primitive(&rule_name, "array");
                }
                let item_rule = self.visit(items, &format!("{sub_name}item"));
                let max = if *max_items < 0 { i32::MAX } else { *max_items };
                let rule = format!(
                    "\"[\" space {} space \"]\"",
                    build_repetition(&item_rule, *min_items, max, "\",\" space")
                );
                self.add_rule(&rule_name, &rule)
            }
            Schema::String {
                pattern,
                format,
                min_length,
                max_length,
            } => {
                if !pattern.is_empty() {
                    return self.visit_pattern(pattern, &rule_name);
                }
                if *format == StringFormat::Uuid {
                    return self.visit_primitive(&rule_name, "uuid");
                }
                if *format != StringFormat::None {
                    let prim = match format {
                        StringFormat::Date => "date-string",
                        StringFormat::Time => "time-string",
                        _ => "date-time-string",
                    };
                    let r = self.add_named_primitive(prim);
                    return self.add_rule(&rule_name, &r);
                }
                if *min_length > 0 || *max_length >= 0 {
                    let char_rule = self.add_named_primitive("char");
                    let max = if *max_length < 0 {
                        i32::MAX
                    } else {
                        *max_length
                    };
                    let rule = format!(
                        "\"\\\"\" {} \"\\\"\"",
                        build_repetition(&char_rule, *min_length, max, "")
                    );
                    return self.add_rule(&rule_name, &rule);
                }
                self.visit_primitive(&rule_name, "string")
            }
            Schema::Integer { minimum, maximum } => {
                if *minimum == i64::MIN && *maximum == i64::MAX {
                    return self.visit_primitive(&rule_name, "integer");
                }
                let mut out = String::from("(");
                if let Err(e) = build_min_max_int(*minimum, *maximum, &mut out, 16, true) {
                    self.errors.push(e);
                }
                out.push(')');
                self.add_rule(&rule_name, &out)
            }
            Schema::Number => self.visit_primitive(&rule_name, "number"),
            Schema::Boolean => self.visit_primitive(&rule_name, "boolean"),
            Schema::Null => self.visit_primitive(&rule_name, "null"),
            Schema::Any => {
                let v = self.add_named_primitive("value");
                self.add_rule(&rule_name, &v)
            }
        }
    }

    /// `check_errors`: errors fail the conversion; warnings are printed.
    pub(crate) fn check_errors(&self) -> Result<(), String> {
        if !self.errors.is_empty() {
            return Err(format!(
                "JSON schema conversion failed:\n{}",
                self.errors.join("\n")
            ));
        }
        if !self.warnings.is_empty() {
            eprintln!(
                "WARNING: JSON schema conversion was incomplete: {}",
                self.warnings.join("; ")
            );
        }
        Ok(())
    }

    pub(crate) fn format_grammar(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.rules {
            s.push_str(k);
            s.push_str(" ::= ");
            s.push_str(v);
            s.push('\n');
        }
        s
    }
}

/// A property name's character inside `[...]`. llama.cpp writes it as is, so a name holding
/// `]` or `\` gives a grammar that does not parse (or means something else); escaped here,
/// which changes nothing for every other character (found by the grammar fuzz target).
fn push_class_char(out: &mut String, c: char) {
    if matches!(c, ']' | '\\') {
        out.push('\\');
    }
    out.push(c);
}
