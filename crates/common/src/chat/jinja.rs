//! A model's own Jinja chat template rendered with minijinja, configured as llama.cpp's
//! engine (common/jinja) behaves: `trim_blocks` and `lstrip_blocks` on, `\r\n` read as `\n`,
//! one trailing newline dropped, Python's string and dict methods, and llama.cpp's globals
//! `raise_exception`, `strftime_now` and its `tojson` layout.
//!
//! Unlike llama.cpp, a render is bounded: minijinja's fuel (one unit per instruction and per
//! 64 bytes of data a template makes) and a cap on the output, so that a template that loops
//! or grows without end fails with an error instead of hanging or exhausting memory.

use minijinja::syntax::SyntaxConfig;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

use super::clock;

/// The work one render may do, in minijinja fuel (about one unit per instruction and per 64
/// bytes of data made). llama.cpp's models/templates need at most 945 for a system message
/// and three turns; most grow linearly, a few hundred per turn, but Gemma 4's looks back
/// over the chat for each message: 0.2 M for 201 messages, 17 M for 2001. This leaves that
/// template about 4800 messages, while a loop that does not end stops after some seconds.
pub const RENDER_FUEL: u64 = 100_000_000;

/// The most bytes one render may write: far more than any context holds (a 1 M-token prompt
/// is a few MiB of text).
pub const MAX_OUTPUT_BYTES: usize = 64 << 20;

/// The name the template is kept under; minijinja's errors name it (`in <string>:1`), as
/// they did when each render compiled the text anew.
const NAME: &str = "<string>";

/// A parsed Jinja chat template and what it can do.
#[derive(Debug)]
pub struct JinjaTemplate {
    src: String,
    fuel: u64,
    /// The configured environment holding the template, compiled once for every render.
    env: Environment<'static>,
    /// Whether the template renders a leading system message (llama.cpp's
    /// `caps.supports_system_role`); where not, the system text joins the next message.
    pub supports_system_role: bool,
    /// Whether the template wants content as a list of `{type: text, text}` parts and
    /// cannot take a plain string (llama.cpp's `supports_typed_content` without
    /// `supports_string_content`): content is then handed over as one text part.
    pub typed_content_only: bool,
}

impl JinjaTemplate {
    /// Parses `src`; a syntax error is returned with minijinja's description.
    pub fn new(src: &str) -> Result<JinjaTemplate, String> {
        Self::with_fuel(src, RENDER_FUEL)
    }

    /// The same with another bound on each render's work (the fuzz target's is small, so
    /// that each input stays fast).
    pub fn with_fuel(src: &str, fuel: u64) -> Result<JinjaTemplate, String> {
        let mut src = src.replace("\r\n", "\n").replace('\r', "\n");
        if src.ends_with('\n') {
            src.pop();
        }
        let src = neutral_generation_tags(&src);
        let mut env = environment(fuel);
        env.add_template_owned(NAME, src.clone())
            .map_err(describe)?;
        let t = JinjaTemplate {
            src,
            fuel,
            env,
            supports_system_role: true,
            typed_content_only: false,
        };
        let supports_system_role = t.probe_system_role();
        let typed_content_only = t.probe_typed_content_only();
        Ok(JinjaTemplate {
            supports_system_role,
            typed_content_only,
            ..t
        })
    }

    pub fn source(&self) -> &str {
        &self.src
    }

    /// The bound on each render's work, in minijinja fuel.
    pub fn fuel(&self) -> u64 {
        self.fuel
    }

    /// Renders with `ctx` as the template's globals; a render that runs out of fuel or
    /// writes more than `MAX_OUTPUT_BYTES` fails with an error saying so.
    pub fn render(&self, ctx: Value) -> Result<String, String> {
        let tmpl = self.env.get_template(NAME).map_err(describe)?;
        let mut out = CappedOutput::default();
        let done = tmpl.render_captured_to(ctx, &mut out).map(drop);
        match done {
            Ok(()) => String::from_utf8(out.buf).map_err(|e| e.to_string()),
            Err(_) if out.over => Err(format!(
                "the chat template wrote more than {} MiB: stopped",
                MAX_OUTPUT_BYTES >> 20
            )),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(format!(
                "the chat template did more work than any chat needs ({} minijinja fuel): \
                 stopped (a loop that does not end, or data that grows without bound)",
                self.fuel
            )),
            Err(e) => Err(describe(e)),
        }
    }

    /// llama.cpp's check: a system message then a user one rendered, and the system role
    /// supported where the template read the system message's content (one that raises
    /// on a system role first, or skips it, never does).
    fn probe_system_role(&self) -> bool {
        let read = Arc::new(AtomicBool::new(false));
        let system = ProbeMessage {
            role: "system",
            content: "System message",
            read: read.clone(),
        };
        let msgs = vec![Value::from_object(system), message("user", "User message")];
        let ctx = Value::from_pairs([
            ("messages", Value::from(msgs)),
            ("tools", Value::from(Vec::<Value>::new())),
            ("bos_token", Value::from("")),
            ("eos_token", Value::from("")),
            ("add_generation_prompt", Value::from(true)),
        ]);
        // a render that fails still tells whether the content was read before it failed
        let _ = self.render(ctx);
        read.load(Ordering::Relaxed)
    }

    /// llama.cpp's first caps check: a user message whose content is a marker string; where
    /// the template fails on it or loses it, but renders the marker given as a text part,
    /// it takes typed content only. (llama.cpp watches for list operations on the content;
    /// minijinja gives no such hook, so both forms are tried.)
    fn probe_typed_content_only(&self) -> bool {
        const MARKER: &str = "STRING_MARKER";
        let ctx = |content: Value| {
            let msg = Value::from_pairs([("role", Value::from("user")), ("content", content)]);
            Value::from_pairs([
                ("messages", Value::from(vec![msg])),
                ("tools", Value::from(Vec::<Value>::new())),
                ("bos_token", Value::from("")),
                ("eos_token", Value::from("")),
                ("add_generation_prompt", Value::from(true)),
            ])
        };
        if self
            .render(ctx(Value::from(MARKER)))
            .is_ok_and(|o| o.contains(MARKER))
        {
            return false;
        }
        self.render(ctx(Value::from(vec![text_part(MARKER)])))
            .is_ok_and(|o| o.contains(MARKER))
    }
}

/// minijinja set up as llama.cpp's engine behaves, each render bounded by `fuel`.
fn environment(fuel: u64) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_fuel(Some(fuel));
    let syntax = SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .build();
    if let Ok(s) = syntax {
        env.set_syntax(s);
    }
    env.set_unknown_method_callback(super::format_guard::unknown_method);
    env.add_filter("format", super::format_guard::format_filter);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_function("tojson", tojson);
    env.add_filter("tojson", tojson);
    env
}

/// The render's output, refusing to grow past `MAX_OUTPUT_BYTES`.
#[derive(Default)]
struct CappedOutput {
    buf: Vec<u8>,
    over: bool,
}

impl io::Write for CappedOutput {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.buf.len() + b.len() > MAX_OUTPUT_BYTES {
            self.over = true;
            return Err(io::Error::other("chat template output cap"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A message that notes when the template reads its content (llama.cpp's value stats).
#[derive(Debug)]
struct ProbeMessage {
    role: &'static str,
    content: &'static str,
    read: Arc<AtomicBool>,
}

impl Object for ProbeMessage {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "role" => Some(Value::from(self.role)),
            "content" => {
                self.read.store(true, Ordering::Relaxed);
                Some(Value::from(self.content))
            }
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["role", "content"])
    }
}

/// One `{role, content}` message as the template sees it (keys in that order).
pub fn message(role: &str, content: &str) -> Value {
    Value::from_pairs([
        ("role", Value::from(role)),
        ("content", Value::from(content)),
    ])
}

/// `{% generation %}` ... `{% endgeneration %}` (Hugging Face's marker of the assistant's
/// own tokens) renders its body unchanged in llama.cpp; minijinja does not know the tag, so
/// each becomes an always-true `if` with the same whitespace control.
fn neutral_generation_tags(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("{%") {
        out.push_str(&rest[..at]);
        let tag = &rest[at..];
        // the close is searched after the open: in `{%}` the `%` belongs to the open
        let Some(end) = tag[2..].find("%}").map(|e| e + 2) else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let (open_ws, body) = match inner.chars().next() {
            Some(c @ ('-' | '+')) => (Some(c), &inner[1..]),
            _ => (None, inner),
        };
        let (body, close_ws) = match body.chars().last() {
            Some(c @ ('-' | '+')) => (&body[..body.len() - 1], Some(c)),
            _ => (body, None),
        };
        let repl = match body.trim() {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        match repl {
            Some(r) => {
                out.push_str("{%");
                out.extend(open_ws);
                out.push(' ');
                out.push_str(r);
                out.push(' ');
                out.extend(close_ws);
                out.push_str("%}");
            }
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The same with the content as one `{type: text, text}` part.
pub fn typed_message(role: &str, content: &str) -> Value {
    Value::from_pairs([
        ("role", Value::from(role)),
        ("content", Value::from(vec![text_part(content)])),
    ])
}

fn text_part(text: &str) -> Value {
    Value::from_pairs([("type", Value::from("text")), ("text", Value::from(text))])
}

fn describe(e: Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("Jinja Exception: {msg}"),
    ))
}

fn strftime_now(fmt: String) -> Result<Value, Error> {
    clock::strftime_now(&fmt).map(Value::from).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            "strftime_now: failed to format time",
        )
    })
}

/// llama.cpp's `tojson`: `, ` and `: ` separators (`,` with an indent), keys in insertion
/// order, non-ASCII kept unless `ensure_ascii`; `sort_keys` is refused as llama.cpp does.
fn tojson(v: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<i64> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    if sort_keys == Some(true) {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson sort_keys=true not implemented",
        ));
    }
    let indent = indent.unwrap_or(-1);
    let seps = separators.unwrap_or_default();
    let item_sep =
        seps.first()
            .cloned()
            .unwrap_or_else(|| if indent < 0 { ", ".into() } else { ",".into() });
    let key_sep = seps.get(1).cloned().unwrap_or_else(|| ": ".into());
    let mut out = String::new();
    write_json(&mut out, &v, 0, indent, &item_sep, &key_sep)?;
    if ensure_ascii == Some(true) {
        out = ascii_escape(&out);
    }
    Ok(Value::from_safe_string(out))
}

fn write_json(
    out: &mut String,
    v: &Value,
    lvl: usize,
    indent: i64,
    item_sep: &str,
    key_sep: &str,
) -> Result<(), Error> {
    let pad = |n: usize| {
        if indent > 0 {
            " ".repeat(n * indent as usize)
        } else {
            String::new()
        }
    };
    let nl = if indent >= 0 { "\n" } else { "" };
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            // an integer as such; a float as C++'s `ostream << double` writes it (%g)
            match (v.is_integer(), v.as_i64(), f64::try_from(v.clone())) {
                (true, Some(i), _) => out.push_str(&i.to_string()),
                (_, _, Ok(f)) => out.push_str(&crate::startup::fmt_g(f)),
                _ => out.push_str(&v.to_string()),
            }
        }
        ValueKind::String => write_json_str(out, v.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            out.push('[');
            if !items.is_empty() {
                out.push_str(nl);
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&pad(lvl + 1));
                    write_json(out, item, lvl + 1, indent, item_sep, key_sep)?;
                    if i + 1 < items.len() {
                        out.push_str(item_sep);
                    }
                    out.push_str(nl);
                }
                out.push_str(&pad(lvl));
            }
            out.push(']');
        }
        ValueKind::Map => {
            let keys: Vec<Value> = v.try_iter()?.collect();
            out.push('{');
            if !keys.is_empty() {
                out.push_str(nl);
                for (i, k) in keys.iter().enumerate() {
                    out.push_str(&pad(lvl + 1));
                    write_json_str(out, &k.to_string());
                    out.push_str(key_sep);
                    write_json(out, &v.get_item(k)?, lvl + 1, indent, item_sep, key_sep)?;
                    if i + 1 < keys.len() {
                        out.push_str(item_sep);
                    }
                    out.push_str(nl);
                }
                out.push_str(&pad(lvl));
            }
            out.push('}');
        }
        _ => out.push_str("null"),
    }
    Ok(())
}

fn write_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn ascii_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", u));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(src: &str, ctx: Value) -> Result<String, String> {
        JinjaTemplate::new(src)?.render(ctx)
    }

    #[test]
    fn format_keys_minijinja_would_panic_on_are_errors() {
        let ctx = Value::from_pairs([("x", Value::from_pairs([("\u{ff5c}", Value::from(1))]))]);
        for src in [
            "{{ '{x[\u{ff5c}]}'.format(x=x) }}",
            "{{ '%(\u{ff5c})s' | format(x) }}",
        ] {
            let e = render(src, ctx.clone()).unwrap_err();
            assert!(
                e.contains("format keys with non-ASCII characters"),
                "{src}: {e}"
            );
        }
        assert_eq!(
            render(
                "{{ '{0} \u{e9}'.format(1) }} {{ '%s \u{e9}' | format(2) }}",
                ctx
            )
            .unwrap(),
            "1 \u{e9} 2 \u{e9}"
        );
    }

    #[test]
    fn tojson_layout_as_llama_cpp() {
        let ctx = Value::from_pairs([(
            "x",
            Value::from_pairs([("b", Value::from(1)), ("a", Value::from(vec!["é", "<"]))]),
        )]);
        assert_eq!(
            render("{{ x | tojson }}", ctx.clone()).unwrap(),
            r#"{"b": 1, "a": ["é", "<"]}"#
        );
        assert_eq!(
            render("{{ x | tojson(indent=2) }}", ctx.clone()).unwrap(),
            "{\n  \"b\": 1,\n  \"a\": [\n    \"é\",\n    \"<\"\n  ]\n}"
        );
        assert_eq!(
            render("{{ x | tojson(ensure_ascii=true) }}", ctx.clone()).unwrap(),
            r#"{"b": 1, "a": ["\u00e9", "<"]}"#
        );
        assert!(render("{{ x | tojson(sort_keys=true) }}", ctx).is_err());
        let nums = Value::from_pairs([(
            "n",
            Value::from(vec![
                Value::from(3),
                Value::from(1.0),
                Value::from(0.1),
                Value::from(1e-7),
            ]),
        )]);
        assert_eq!(
            render("{{ n | tojson }}", nums).unwrap(),
            "[3, 1, 0.1, 1e-07]"
        );
    }

    #[test]
    fn globals_and_python_methods() {
        let e = render("{{ raise_exception('no') }}", Value::UNDEFINED).unwrap_err();
        assert!(e.contains("Jinja Exception: no"), "{e}");
        let y = render("{{ strftime_now('%Y') }}", Value::UNDEFINED).unwrap();
        assert_eq!(y.len(), 4);
        assert_eq!(
            render("{{ '  a b '.strip().title() }}", Value::UNDEFINED).unwrap(),
            "A B"
        );
        assert_eq!(
            render(
                "{% for k, v in {'x': 1}.items() %}{{ k }}={{ v }}{% endfor %}",
                Value::UNDEFINED
            )
            .unwrap(),
            "x=1"
        );
    }

    #[test]
    fn block_whitespace_and_trailing_newline() {
        assert_eq!(
            render("a\r\n  {% if true %}\nb\n{% endif %}\n", Value::UNDEFINED).unwrap(),
            "a\nb\n"
        );
    }

    #[test]
    fn generation_tags_render_their_body() {
        let src = "a{%- generation -%}\n b {% endgeneration %}c{% if x %}{% endif %}";
        assert_eq!(
            neutral_generation_tags(src),
            "a{%- if true -%}\n b {% endif %}c{% if x %}{% endif %}"
        );
        assert_eq!(render(src, Value::UNDEFINED).unwrap(), "ab c");
        // found by the jinja fuzz target: `{%}` (whose `%}` overlaps its `{%`) panicked
        assert_eq!(neutral_generation_tags("{%}x%}"), "{%}x%}");
        assert_eq!(neutral_generation_tags("a{%}"), "a{%}");
        assert!(JinjaTemplate::new("{%}}r%}}{{ m%}").is_err());
    }

    #[test]
    fn runaway_render_stops_with_an_error() {
        let t = JinjaTemplate::with_fuel(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            100_000,
        )
        .unwrap();
        let e = t.render(Value::UNDEFINED).unwrap_err();
        assert!(e.contains("more work than any chat needs"), "{e}");
        // templates parsed without a bound of their own get the default one
        assert_eq!(JinjaTemplate::new("x").unwrap().fuel(), RENDER_FUEL);
    }

    #[test]
    fn huge_output_stops_with_an_error() {
        // 100 M bytes of output: within the fuel (1.6 M units) but past the output cap
        let t = JinjaTemplate::with_fuel(
            "{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}",
            RENDER_FUEL,
        )
        .unwrap();
        let e = t.render(Value::UNDEFINED).unwrap_err();
        assert!(e.contains("wrote more than 64 MiB"), "{e}");
        // a large but bounded output is fine
        let t =
            JinjaTemplate::new("{% for i in range(10) %}{{ 'x' * 100000 }}{% endfor %}").unwrap();
        assert_eq!(t.render(Value::UNDEFINED).unwrap().len(), 1_000_000);
    }

    #[test]
    fn real_template_far_below_the_bound() {
        // Gemma 2's template (tests/fixtures) formats a 2001-message chat with a fiftieth
        // of the default fuel
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/gemma3-chat/google-gemma-2-2b-it.jinja"
        );
        let src = std::fs::read_to_string(path).unwrap();
        let t = JinjaTemplate::with_fuel(&src, RENDER_FUEL / 50).unwrap();
        let mut msgs = Vec::new();
        for i in 0..1000 {
            msgs.push(message("user", &format!("question {i}")));
            msgs.push(message("assistant", &format!("answer {i}")));
        }
        msgs.push(message("user", "last"));
        let ctx = Value::from_pairs([
            ("messages", Value::from(msgs)),
            ("bos_token", Value::from("<bos>")),
            ("add_generation_prompt", Value::from(true)),
        ]);
        let out = t.render(ctx).unwrap();
        assert!(
            out.ends_with("<start_of_turn>model\n"),
            "{}",
            &out[out.len() - 40..]
        );
    }

    #[test]
    fn syntax_error_is_an_error() {
        assert!(JinjaTemplate::new("{% if %}").is_err());
    }

    #[test]
    fn system_role_probe() {
        assert!(
            JinjaTemplate::new("{% for m in messages %}{{ m.content }}{% endfor %}")
                .unwrap()
                .supports_system_role
        );
        let no_sys = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}";
        assert!(!JinjaTemplate::new(no_sys).unwrap().supports_system_role);
        let drops = "{% for m in messages %}{% if m.role != 'system' %}{{ m.content }}{% endif %}{% endfor %}";
        assert!(!JinjaTemplate::new(drops).unwrap().supports_system_role);
        // read, not printed verbatim: still supported, as llama.cpp counts it
        let reads = "{% set s = messages[0]['content'] | upper %}{{ s | length }}";
        assert!(JinjaTemplate::new(reads).unwrap().supports_system_role);
    }

    #[test]
    fn typed_content_probe() {
        let plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
        assert!(!JinjaTemplate::new(plain).unwrap().typed_content_only);
        let typed =
            "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}";
        let t = JinjaTemplate::new(typed).unwrap();
        assert!(t.typed_content_only);
        let both = "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{{ m.content[0].text }}{% endif %}{% endfor %}";
        assert!(!JinjaTemplate::new(both).unwrap().typed_content_only);
    }
}
