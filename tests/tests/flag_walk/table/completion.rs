//! llama-completion's own flags: conversation, prompts, input and display.

use super::*;

pub(super) fn completion_flags(v: &mut Vec<Entry>) {
    use Want::*;
    let c: &[&str] = &["completion"];
    let ppl: &[&str] = &["perplexity", "imatrix"];
    // ----- llama-completion's own -----
    v.push(e(
        c,
        &["--verbose-prompt"],
        &[],
        Has("number of tokens in prompt = 7"),
        "c1",
    ));
    v.push(quiet(pre(
        e(c, &["--display-prompt"], &[], Has("hello world"), ""),
        &["--no-display-prompt"],
    )));
    v.push(quiet(e(
        c,
        &["--no-display-prompt"],
        &[],
        Lacks("hello world"),
        "",
    )));
    v.push(e(
        c,
        &["-co", "--color"],
        &["on"],
        Has("\x1b[33mhello world"),
        "",
    ));
    v.push(e(
        c,
        &["--context-shift", "--no-context-shift"],
        &[],
        Tested("tests/tests/completion_cli.rs"),
        "",
    ));
    v.push(e(
        ppl,
        &["--context-shift", "--no-context-shift"],
        &[],
        Warn,
        "warn",
    ));
    v.push(e(
        c,
        &["-sys", "--system-prompt"],
        &["be brief", "-cnv"],
        Has("be brief"),
        "",
    ));
    v.push(e(
        c,
        &["-sysf", "--system-prompt-file"],
        &["{D}/sys.txt", "-cnv"],
        Has("be brief"),
        "",
    ));
    v.push(e(
        c,
        &["-ptc", "--print-token-count"],
        &["1"],
        Has("consumed so far = 7 / 256"),
        "c1",
    ));
    v.push(e(
        c,
        &["--prompt-cache"],
        &["{D}/cache-new.bin"],
        Has("session file does not exist, will create"),
        "",
    ));
    v.push(e(
        c,
        &["--prompt-cache-all"],
        &["--prompt-cache", "{D}/cache-all.bin"],
        Tested("tests/tests/prompt_cache_cli.rs"),
        "",
    ));
    v.push(e(
        c,
        &["--prompt-cache-ro"],
        &["--prompt-cache", "{D}/cache-ro.bin"],
        Tested("tests/tests/prompt_cache_cli.rs"),
        "",
    ));
    v.push(e(
        c,
        &["-r", "--reverse-prompt"],
        &["STOP", "-i"],
        Has("Reverse prompt: 'STOP'"),
        "",
    ));
    v.push(e(
        c,
        &["-sp", "--special"],
        &[],
        Tested("tests/tests/completion_cli.rs"),
        "",
    ));
    v.push(pre(
        e(c, &["-cnv", "--conversation"], &[], Has("EOF by user"), ""),
        &[],
    ));
    v.push(pre(
        e(
            c,
            &["-no-cnv", "--no-conversation"],
            &[],
            Lacks("EOF by user"),
            "",
        ),
        &["-cnv"],
    ));
    v.push(e(
        c,
        &["-st", "--single-turn"],
        &[],
        Tested("tests/tests/readme_cli.rs"),
        "",
    ));
    v.push(e(
        c,
        &["-i", "--interactive"],
        &[],
        Has("interactive mode on"),
        "",
    ));
    v.push(e(
        c,
        &["-if", "--interactive-first"],
        &[],
        Has("interactive mode on"),
        "",
    ));
    // two typed lines: one turn with -mli (one "> " before both), two without
    let mut mli = pre(
        e(
            c,
            &["-mli", "--multiline-input"],
            &[],
            Has("\n> a\nb\n"),
            "",
        ),
        &["-cnv"],
    );
    mli.stdin = "a\nb\n";
    v.push(mli);
    v.push(e(
        c,
        &["--in-prefix-bos"],
        &["-i"],
        Has("Input prefix with BOS"),
        "",
    ));
    v.push(e(
        c,
        &["--in-prefix"],
        &["PRE", "-i"],
        Has("Input prefix: 'PRE'"),
        "",
    ));
    v.push(e(
        c,
        &["--in-suffix"],
        &["SUF", "-i"],
        Has("Input suffix: 'SUF'"),
        "",
    ));
    v.push(pre(
        e(
            &["completion", "perplexity"],
            &["--warmup"],
            &[],
            Has("warming up the model"),
            "",
        ),
        &["--no-warmup"],
    ));
    v.push(e(
        &["completion", "perplexity"],
        &["--no-warmup"],
        &[],
        Lacks("warming up the model"),
        "c2",
    ));
    v.push(e(
        c,
        &["-gan", "--grp-attn-n"],
        &["2", "-gaw", "256"],
        Has("self-extend: n_ctx_train = 4096, grp_attn_n = 2, grp_attn_w = 256"),
        "",
    ));
    v.push(e(
        c,
        &["-gaw", "--grp-attn-w"],
        &["6", "-gan", "4"],
        Fails("grp_attn_w (6) must be a positive multiple of grp_attn_n (4)"),
        "",
    ));
    v.push(e(
        c,
        &["--jinja"],
        &[],
        Tested("tests/tests/chat_cli.rs"),
        "",
    ));
    v.push(pre(
        e(
            c,
            &["--no-jinja"],
            &[],
            Fails("error: the supplied chat template is not supported"),
            "",
        ),
        &[
            "-cnv",
            "--jinja",
            "--chat-template-file",
            "{D}/template.jinja",
        ],
    ));
    v.push(e(
        c,
        &["--reasoning-format"],
        &["none"],
        Has("warning: --reasoning-format has no effect in llama-completion"),
        "c1",
    ));
    v.push(e(
        c,
        &["-rea", "--reasoning"],
        &["on"],
        Has("warning: -rea/--reasoning-effort reach only the chat template"),
        "c1",
    ));
    v.push(e(
        c,
        &["--reasoning-effort"],
        &["low"],
        Has("warning: -rea/--reasoning-effort reach only the chat template"),
        "c2",
    ));
    v.push(e(
        c,
        &["--reasoning-budget"],
        &["1"],
        Has("warning: --reasoning-budget has no effect in llama-completion"),
        "c1",
    ));
    v.push(e(
        c,
        &["--reasoning-budget-message"],
        &["x"],
        Has("warning: --reasoning-budget-message has no effect in llama-completion"),
        "c1",
    ));
    // they reach the chat template example llama-completion logs (as in llama.cpp)
    let reason: &'static [&'static str] = &[
        "-cnv",
        "--jinja",
        "--chat-template-file",
        "{D}/reason.jinja",
    ];
    v.push(pre(
        e(
            c,
            &["--reasoning-preserve"],
            &[],
            Has("How are you?>>[True]"),
            "",
        ),
        &[
            "-cnv",
            "--jinja",
            "--chat-template-file",
            "{D}/reason.jinja",
            "--no-reasoning-preserve",
        ],
    ));
    v.push(e(
        c,
        &["--no-reasoning-preserve"],
        reason,
        Has("How are you?>>[False]"),
        "",
    ));
    v.push(e(
        c,
        &["--chat-template"],
        &["gemma", "-cnv", "--verbose-prompt"],
        Has("<start_of_turn>"),
        "",
    ));
    v.push(e(
        c,
        &["--chat-template-file"],
        &[
            "{D}/template.jinja",
            "-cnv",
            "--jinja",
            "-sys",
            "S",
            "--verbose-prompt",
        ],
        Has("<<S>>"),
        "",
    ));
    v.push(e(
        c,
        &["--skip-chat-parsing", "--no-skip-chat-parsing"],
        &[],
        Tested("tests/tests/chat_cli.rs"),
        "",
    ));
    v.push(pre(
        e(c, &["--simple-io"], &[], Lacks("\x1b[33m"), ""),
        &["-co", "on"],
    ));
}
