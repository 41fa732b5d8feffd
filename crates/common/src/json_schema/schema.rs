//! `common_chat_schema_from_json` (llama.cpp's common/json-schema.cpp): a JSON schema read into
//! the typed tree the grammar converter walks, with same-document `$ref`s collected by path
//! and the errors for schemas outside the supported subset.

use std::collections::BTreeMap;

use super::value::Json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringFormat {
    None,
    Uuid,
    Date,
    Time,
    DateTime,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    pub name: String,
    pub schema: Schema,
    pub required: bool,
}

/// `common_chat_schema` and its kinds.
#[derive(Clone, Debug, PartialEq)]
pub enum Schema {
    Any,
    /// A `#/...` reference, resolved through [`Document::refs`].
    Ref(String),
    AnyOf(Vec<Schema>),
    AllOf(Vec<Schema>),
    Const(Json),
    Enum(Vec<Json>),
    Null,
    Boolean,
    Number,
    /// Inclusive bounds; i64::MIN / i64::MAX for none.
    Integer {
        minimum: i64,
        maximum: i64,
    },
    String {
        pattern: String,
        format: StringFormat,
        min_length: i32,
        /// -1 for unbounded.
        max_length: i32,
    },
    Array {
        items: Box<Schema>,
        min_items: i32,
        /// -1 for unbounded.
        max_items: i32,
    },
    Tuple(Vec<Schema>),
    Object {
        properties: Vec<Property>,
        /// None when additional properties are not allowed.
        additional: Option<Box<Schema>>,
    },
}

/// `common_chat_schema_document`.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub root: Schema,
    pub refs: BTreeMap<String, Schema>,
}

type Res<T> = Result<T, String>;

fn fail<T>(path: &str, msg: &str) -> Res<T> {
    Err(format!("JSON schema error at {path}: {msg}"))
}

/// Build the document; the error is llama.cpp's "JSON schema error at PATH: ..." text.
pub fn schema_from_json(root: &Json) -> Result<Document, String> {
    let mut b = Builder {
        root,
        refs: BTreeMap::new(),
        depth: 0,
    };
    let node = b.build_node(root, "#")?;
    let refs = b
        .refs
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or(Schema::Any)))
        .collect();
    Ok(Document { root: node, refs })
}

struct Builder<'a> {
    root: &'a Json,
    /// None while the target is being built, so a cycle back to it stops.
    refs: BTreeMap<String, Option<Schema>>,
    /// `$ref` targets being built inside each other.
    depth: usize,
}

fn get_count(schema: &Json, key: &str, path: &str, def: i32) -> Res<i32> {
    let Some(v) = schema.get(key) else {
        return Ok(def);
    };
    // llama.cpp reads the count as an int, truncating wider values
    let n = match *v {
        Json::Int(i) => i as i32,
        Json::UInt(u) => u as i32,
        _ => return fail(path, &format!("{key} must be a non-negative integer")),
    };
    if n < 0 {
        return fail(path, &format!("{key} must be a non-negative integer"));
    }
    Ok(n)
}

/// A fractional bound is rounded inwards, towards the integers it still admits.
fn get_bound(schema: &Json, key: &str, path: &str, round_up: bool) -> Res<i64> {
    let v = schema.get(key).unwrap_or(&Json::Null);
    match *v {
        Json::Int(i) => Ok(i),
        Json::UInt(u) => Ok(u as i64),
        Json::Float(d) => Ok(if round_up { d.ceil() } else { d.floor() } as i64),
        _ => fail(path, &format!("{key} must be a number")),
    }
}

fn get_format(schema: &Json, path: &str) -> Res<StringFormat> {
    let Some(v) = schema.get("format") else {
        return Ok(StringFormat::None);
    };
    let Some(f) = v.as_str() else {
        return fail(path, "format must be a string");
    };
    let b = f.as_bytes();
    Ok(match f {
        "date" => StringFormat::Date,
        "time" => StringFormat::Time,
        "date-time" => StringFormat::DateTime,
        "uuid" => StringFormat::Uuid,
        _ if b.len() == 5 && f.starts_with("uuid") && (b'1'..=b'5').contains(&b[4]) => {
            StringFormat::Uuid
        }
        _ => StringFormat::None,
    })
}

impl<'a> Builder<'a> {
    fn resolve_ref(&self, r: &str, path: &str) -> Res<&'a Json> {
        let mut target = self.root;
        let tokens: Vec<&str> = r[1..].split('/').collect();
        for sel in tokens.iter().skip(1) {
            match target {
                Json::Object(_) if target.contains(sel) => {
                    target = target.get(sel).unwrap_or(&Json::Null);
                }
                Json::Array(items) => {
                    let idx = sel
                        .parse::<u64>()
                        .ok()
                        .map_or(items.len(), |i| i.min(usize::MAX as u64) as usize);
                    if idx >= items.len() {
                        return fail(
                            path,
                            &format!("cannot resolve $ref {r}, {sel} is out of range"),
                        );
                    }
                    target = &items[idx];
                }
                _ => return fail(path, &format!("cannot resolve $ref {r}, {sel} not found")),
            }
        }
        Ok(target)
    }

    fn build_ref(&mut self, value: &Json, path: &str) -> Res<Schema> {
        let Some(r) = value.as_str() else {
            return fail(path, "$ref must be a string");
        };
        if !r.starts_with("#/") {
            return fail(
                path,
                &format!(
                    "unsupported $ref {r}, only references into the same document are supported"
                ),
            );
        }
        if !self.refs.contains_key(r) {
            // llama.cpp recurses without a limit; a long $ref chain would overflow the stack
            if self.depth >= super::converter::MAX_REF_DEPTH {
                return fail(path, &format!("$ref {r} is nested too deep"));
            }
            self.refs.insert(r.to_string(), None);
            let target = self.resolve_ref(r, path)?;
            self.depth += 1;
            let node = self.build_node(target, r);
            self.depth -= 1;
            self.refs.insert(r.to_string(), Some(node?));
        }
        Ok(Schema::Ref(r.to_string()))
    }

    fn build_alternatives(&mut self, alts: &Json, path: &str) -> Res<Vec<Schema>> {
        let Json::Array(items) = alts else {
            return fail(path, "must be an array of schemas");
        };
        if items.is_empty() {
            return fail(path, "must not be empty");
        }
        items
            .iter()
            .enumerate()
            .map(|(i, alt)| self.build_node(alt, &format!("{path}/{i}")))
            .collect()
    }

    fn build_object(&mut self, schema: &Json, path: &str) -> Res<Schema> {
        let mut required: Vec<&str> = Vec::new();
        if let Some(Json::Array(names)) = schema.get("required") {
            required.extend(names.iter().filter_map(|n| n.as_str()));
        }
        let mut properties = Vec::new();
        if let Some(props) = schema.get("properties") {
            let Json::Object(kv) = props else {
                return fail(path, "properties must be an object");
            };
            for (name, prop) in kv {
                let node = self.build_node(prop, &format!("{path}/properties/{name}"))?;
                properties.push(Property {
                    name: name.clone(),
                    schema: node,
                    required: required.contains(&name.as_str()),
                });
            }
        }
        let mut additional = None;
        if let Some(a) = schema.get("additionalProperties") {
            match a {
                Json::Bool(true) => additional = Some(Box::new(Schema::Any)),
                Json::Bool(false) => {}
                Json::Object(_) => {
                    additional = Some(Box::new(
                        self.build_node(a, &format!("{path}/additionalProperties"))?,
                    ))
                }
                _ => return fail(path, "additionalProperties must be a boolean or a schema"),
            }
        } else if !schema.contains("properties") {
            // {"type": "object"} on its own accepts any object
            additional = Some(Box::new(Schema::Any));
        }
        Ok(Schema::Object {
            properties,
            additional,
        })
    }

    fn build_array(&mut self, schema: &Json, path: &str) -> Res<Schema> {
        let items = if schema.contains("items") || schema.contains("prefixItems") {
            let key = if schema.contains("items") {
                "items"
            } else {
                "prefixItems"
            };
            let items = schema.get(key).unwrap_or(&Json::Null);
            if let Json::Array(list) = items {
                let mut tuple = Vec::with_capacity(list.len());
                for (i, item) in list.iter().enumerate() {
                    tuple.push(self.build_node(item, &format!("{path}/{key}/{i}"))?);
                }
                return Ok(Schema::Tuple(tuple));
            }
            self.build_node(items, &format!("{path}/{key}"))?
        } else {
            Schema::Any
        };
        Ok(Schema::Array {
            items: Box::new(items),
            min_items: get_count(schema, "minItems", path, 0)?,
            max_items: get_count(schema, "maxItems", path, -1)?,
        })
    }

    fn build_string(&mut self, schema: &Json, path: &str) -> Res<Schema> {
        let mut pattern = String::new();
        if let Some(p) = schema.get("pattern") {
            let Some(p) = p.as_str() else {
                return fail(path, "pattern must be a string");
            };
            pattern = p.to_string();
        }
        Ok(Schema::String {
            pattern,
            format: get_format(schema, path)?,
            min_length: get_count(schema, "minLength", path, 0)?,
            max_length: get_count(schema, "maxLength", path, -1)?,
        })
    }

    fn build_integer(&mut self, schema: &Json, path: &str) -> Res<Schema> {
        let mut minimum = i64::MIN;
        let mut maximum = i64::MAX;
        if schema.contains("minimum") {
            minimum = get_bound(schema, "minimum", path, true)?;
        } else if schema.contains("exclusiveMinimum") {
            minimum = get_bound(schema, "exclusiveMinimum", path, false)?.wrapping_add(1);
        }
        if schema.contains("maximum") {
            maximum = get_bound(schema, "maximum", path, false)?;
        } else if schema.contains("exclusiveMaximum") {
            maximum = get_bound(schema, "exclusiveMaximum", path, true)?.wrapping_sub(1);
        }
        Ok(Schema::Integer { minimum, maximum })
    }

    fn build_node(&mut self, schema: &Json, path: &str) -> Res<Schema> {
        if !schema.is_object() {
            return fail(path, "schema must be an object");
        }
        if let Some(r) = schema.get("$ref") {
            return self.build_ref(r, path);
        }
        if schema.contains("oneOf") || schema.contains("anyOf") {
            let key = if schema.contains("oneOf") {
                "oneOf"
            } else {
                "anyOf"
            };
            let alts = schema.get(key).unwrap_or(&Json::Null);
            return Ok(Schema::AnyOf(
                self.build_alternatives(alts, &format!("{path}/{key}"))?,
            ));
        }
        let ty = schema.get("type").cloned().unwrap_or(Json::Null);
        if let Json::Array(types) = &ty {
            // {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}
            if types.is_empty() {
                return fail(path, "type must not be empty");
            }
            let mut children = Vec::with_capacity(types.len());
            for (i, t) in types.iter().enumerate() {
                let mut alt = schema.clone();
                alt.set("type", t.clone());
                children.push(self.build_node(&alt, &format!("{path}/type/{i}"))?);
            }
            return Ok(Schema::AnyOf(children));
        }
        if let Some(c) = schema.get("const") {
            return Ok(Schema::Const(c.clone()));
        }
        if let Some(values) = schema.get("enum") {
            match values {
                Json::Array(v) if !v.is_empty() => return Ok(Schema::Enum(v.clone())),
                _ => return fail(path, "enum must be a non-empty array"),
            }
        }
        if !matches!(ty, Json::Null | Json::Str(_)) {
            return fail(path, "type must be a string or an array of strings");
        }
        let type_name = ty.as_str().unwrap_or("");
        let has_properties = schema.contains("properties")
            || schema
                .get("additionalProperties")
                .is_some_and(|a| *a != Json::Bool(true));
        let all_of = |b: &mut Self| -> Res<Schema> {
            let alts = schema.get("allOf").unwrap_or(&Json::Null);
            Ok(Schema::AllOf(
                b.build_alternatives(alts, &format!("{path}/allOf"))?,
            ))
        };
        match type_name {
            "" => {
                // without a type the structural keywords decide, in the converter's order
                if has_properties {
                    return self.build_object(schema, path);
                }
                if schema.contains("allOf") {
                    return all_of(self);
                }
                if schema.contains("items") || schema.contains("prefixItems") {
                    return self.build_array(schema, path);
                }
                if schema.contains("pattern")
                    || schema.contains("minLength")
                    || schema.contains("maxLength")
                    || get_format(schema, path)? != StringFormat::None
                {
                    return self.build_string(schema, path);
                }
                Ok(Schema::Any)
            }
            "object" => {
                if !has_properties && schema.contains("allOf") {
                    return all_of(self);
                }
                self.build_object(schema, path)
            }
            "string" => {
                if schema.contains("allOf") {
                    return all_of(self);
                }
                self.build_string(schema, path)
            }
            "array" => self.build_array(schema, path),
            "integer" => self.build_integer(schema, path),
            "number" => Ok(Schema::Number),
            "boolean" => Ok(Schema::Boolean),
            "null" => Ok(Schema::Null),
            other => fail(path, &format!("unrecognized type {other}")),
        }
    }
}
