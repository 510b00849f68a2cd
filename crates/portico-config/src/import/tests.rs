use super::*;

fn read(origin: &str, text: &str) -> Import {
    translate(&SourceFile {
        origin,
        text,
        workspace: Some(Path::new("/work/project")),
        home: Some(Path::new("/home/me")),
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn exports(import: &Import) -> Vec<(&str, &str)> {
    import
        .exports
        .iter()
        .map(|e| (e.variable.as_str(), e.reason.as_str()))
        .collect()
}

const CLAUDE: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_s3cret", "LOG_LEVEL": "debug"}
    },
    "remote": {
      "url": "https://mcp.example.com/mcp",
      "headers": {"Authorization": "Bearer abc123", "X-Trace": "on"}
    },
    "local": {"url": "http://127.0.0.1:3001/mcp", "disabled": true}
  }
}"#;

#[test]
fn claude_desktop_servers_become_entries_without_their_secrets() {
    let import = read("claude.json", CLAUDE);
    let merged = import
        .merge("config.toml", Some(""), OnClash::Refuse)
        .unwrap();
    assert_eq!(
        merged.added_text,
        r#"# Imported from claude.json
[[mcp_servers]]
name = "github"
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_PERSONAL_ACCESS_TOKEN}", LOG_LEVEL = "debug" }
[mcp_servers.transport]
type = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

# Imported from claude.json
[[mcp_servers]]
name = "remote"
[mcp_servers.transport]
type = "sse"   # no type was given: Streamable HTTP, else legacy HTTP+SSE
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${REMOTE_TOKEN}", X-Trace = "on" }

# Imported from claude.json
[[mcp_servers]]
name = "local"
enabled = false                # disabled where it was imported from
allow_private_network = true   # its URL is on this machine or a private network
[mcp_servers.transport]
type = "sse"   # no type was given: Streamable HTTP, else legacy HTTP+SSE
url = "http://127.0.0.1:3001/mcp"
"#
    );
    assert!(!merged.text.contains("ghp_s3cret") && !merged.text.contains("abc123"));
    // The literal is kept for the secret store, and never shown.
    let github = &import.exports[0];
    assert_eq!(
        github.literal.as_ref().map(|l| l.expose()),
        Some("ghp_s3cret")
    );
    assert!(!format!("{import:?}").contains("ghp_s3cret"));
    assert_eq!(merged.added, ["github", "remote", "local"]);
    assert_eq!(
        exports(&import),
        [
            (
                "GITHUB_PERSONAL_ACCESS_TOKEN",
                "server `github`: env GITHUB_PERSONAL_ACCESS_TOKEN had a literal value (still in claude.json; not copied)"
            ),
            (
                "REMOTE_TOKEN",
                "server `remote`: header Authorization had a literal value (still in claude.json; not copied)"
            ),
        ]
    );
    assert!(import.warnings.is_empty(), "{:?}", import.warnings);
    let config = crate::parse("merged", &merged.text).unwrap();
    assert_eq!(config.mcp_servers.len(), 3);
    assert!(!config.mcp_servers[2].enabled);
}

#[test]
fn cursor_references_and_workspace_paths_are_translated() {
    let import = read(
        "/work/project/.cursor/mcp.json",
        r#"{"mcpServers": {
            "fs": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/server.js", "${userHome}/notes"],
                   "env": {"API_KEY": "${env:MY_API_KEY}"}},
            "web": {"type": "http", "url": "https://x.example/mcp", "headers": {"X-Api-Key": "k-123"}}
        }}"#,
    );
    let [fs, web] = &import.servers[..] else {
        panic!("{import:?}")
    };
    assert_eq!(
        fs.transport,
        ImportedTransport::Stdio {
            command: "node".into(),
            args: vec!["/work/project/server.js".into(), "/home/me/notes".into()],
            cwd: None
        }
    );
    assert_eq!(fs.env, [("API_KEY".into(), "${MY_API_KEY}".into())]);
    assert_eq!(
        web.transport,
        ImportedTransport::Remote {
            kind: "http",
            detected: false,
            url: "https://x.example/mcp".into(),
            headers: vec![("X-Api-Key".into(), "${WEB_X_API_KEY}".into())],
        }
    );
    assert_eq!(
        exports(&import),
        [
            ("MY_API_KEY", "server `fs`: env API_KEY refers to it"),
            (
                "WEB_X_API_KEY",
                "server `web`: header X-Api-Key had a literal value (still in /work/project/.cursor/mcp.json; not copied)"
            ),
        ]
    );
}

const VSCODE: &str = r#"{
  // VS Code allows comments and trailing commas here.
  "inputs": [
    {"type": "promptString", "id": "github-token", "description": "GitHub Personal Access Token", "password": true},
  ],
  "servers": {
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": {"Authorization": "Bearer ${input:github-token}"},
    },
    "fs": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${workspaceFolder}"],
      "env": {"DB_PASSWORD": "${input:db}"},
      "envFile": "${workspaceFolder}/.env",
    },
    "old": {"type": "sse", "url": "http://localhost:8080/sse"},
  },
}"#;

#[test]
fn vs_code_servers_and_inputs_become_entries_and_variables() {
    let import = read("/work/project/.vscode/mcp.json", VSCODE);
    let names: Vec<&str> = import.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "fs", "old"]);
    assert_eq!(
        import.servers[0].transport,
        ImportedTransport::Remote {
            kind: "http",
            detected: false,
            url: "https://api.githubcopilot.com/mcp/".into(),
            headers: vec![("Authorization".into(), "Bearer ${GITHUB_TOKEN}".into())],
        }
    );
    assert_eq!(
        import.servers[1].transport,
        ImportedTransport::Stdio {
            command: "npx".into(),
            args: vec![
                "-y".into(),
                "@modelcontextprotocol/server-filesystem".into(),
                "/work/project".into()
            ],
            cwd: None
        }
    );
    assert_eq!(
        import.servers[1].env,
        [("DB_PASSWORD".into(), "${DB}".into())]
    );
    assert!(import.servers[2].allow_private_network);
    assert_eq!(
        exports(&import),
        [
            (
                "GITHUB_TOKEN",
                "server `github`: header Authorization was VS Code's input `github-token` (GitHub Personal Access Token)"
            ),
            (
                "DB",
                "server `fs`: env DB_PASSWORD was VS Code's input `db`"
            ),
        ]
    );
    assert_eq!(
        import.warnings,
        [
            "server `fs`: envFile `${workspaceFolder}/.env` is not read; add its variables to the entry's env"
        ]
    );
    let merged = import.merge("config.toml", None, OnClash::Refuse).unwrap();
    assert!(merged.text.starts_with(crate::STARTER_CONFIG));
    assert_eq!(merged.added_text, merged.text);
}

#[test]
fn vs_code_settings_keep_servers_under_mcp() {
    let import = read(
        "settings.json",
        r#"{"editor.fontSize": 14, "mcp": {"servers": {"t": {"command": "mcp-t"}}}}"#,
    );
    assert_eq!(import.servers.len(), 1);
    assert_eq!(import.servers[0].name, "t");
}

#[test]
fn bad_entries_are_skipped_with_a_warning_naming_them() {
    let import = read(
        "x.json",
        r#"{"mcpServers": {
            "none": {},
            "both": {"command": "a", "url": "https://b.example"},
            "odd": {"type": "websocket", "url": "wss://c.example"},
            "typo": {"command": "a", "args": "not a list"},
            "extra": {"command": "a", "autoApprove": ["x"], "timeout": 60},
            "argref": {"command": "a", "args": ["--token=${env:TOKEN}"]}
        }}"#,
    );
    let names: Vec<&str> = import.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["extra", "argref"]);
    assert_eq!(
        import.warnings,
        [
            "server `none` was skipped: it has neither `command` nor `url`",
            "server `both` was skipped: it has both `command` and `url`; keep one",
            "server `odd` was skipped: type `websocket` is not one Portico knows (stdio, http, sse)",
            "server `typo` was skipped: invalid type: string \"not a list\", expected a sequence",
            "server `extra`: `autoApprove`, `timeout` not imported (Portico has no such setting)",
            "server `argref`: args[0] refers to ${TOKEN}, but Portico expands ${VAR} only in env values and headers; write the value there instead",
        ]
    );
    // Setting TOKEN would not help: Portico does not expand args.
    assert_eq!(import.exports, []);
}

#[test]
fn files_without_servers_say_what_was_expected() {
    let file = |text| SourceFile {
        origin: "f.json",
        text,
        workspace: None,
        home: None,
    };
    assert_eq!(
        translate(&file(r#"{"theme": "dark"}"#))
            .unwrap_err()
            .to_string(),
        "f.json has no MCP servers: expected an `mcpServers` object (Claude Desktop, Cursor) or `servers` (VS Code's mcp.json; `mcp.servers` in its settings.json)"
    );
    assert_eq!(
        translate(&file("{\n  \"mcpServers\": [1,\n}")).unwrap_err(),
        ImportError::NotJson {
            origin: "f.json".into(),
            line: 3,
            column: 1,
            message: "expected `,` or `]`".into()
        }
    );
    assert_eq!(
        translate(&file(r#"{"servers": []}"#))
            .unwrap_err()
            .to_string(),
        "f.json: `servers` is an array, not an object of servers by name"
    );
    // Without a known workspace, `${workspaceFolder}` cannot be filled in.
    let import = translate(&file(
        r#"{"servers": {"s": {"command": "x", "args": ["${workspaceFolder}"]}}}"#,
    ))
    .unwrap();
    assert_eq!(
        import.warnings,
        [
            "server `s`: args[0] has `${workspaceFolder}`, which Portico cannot fill in; edit it in the config"
        ]
    );
}

const EXISTING: &str = "# my config, with a comment that must survive\n[server]\nlisten = \"127.0.0.1:4300\"\n\n[[mcp_servers]]\nname = \"github\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"other\"\n";

#[test]
fn merging_keeps_the_file_refuses_clashes_and_renames_on_request() {
    let import = read("claude.json", CLAUDE);
    let refused = import
        .merge("config.toml", Some(EXISTING), OnClash::Refuse)
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "server `github` from claude.json: config.toml already has a different server `github`; nothing was written. Rename or remove them in the source or the config, or pass --rename to import them under new names"
    );
    let renamed = import
        .merge("config.toml", Some(EXISTING), OnClash::Rename)
        .unwrap();
    assert!(renamed.text.starts_with(EXISTING), "{}", renamed.text);
    assert_eq!(renamed.added, ["github-2", "remote", "local"]);
    assert_eq!(renamed.renamed, [("github".into(), "github-2".into())]);
    let config = crate::parse("merged", &renamed.text).unwrap();
    assert_eq!(config.server.listen, "127.0.0.1:4300");
    assert_eq!(config.mcp_servers.len(), 4);

    // Importing again changes nothing: every server is already there, the same.
    let again = import
        .merge("config.toml", Some(&renamed.text), OnClash::Refuse)
        .unwrap();
    assert_eq!(again.text, renamed.text);
    assert!(again.added.is_empty());
    assert_eq!(
        again.unchanged,
        [
            ("github".into(), "github-2".into()),
            ("remote".into(), "remote".into()),
            ("local".into(), "local".into())
        ]
    );
}

#[test]
fn two_imported_servers_with_one_name_clash_too() {
    let mut import = read("a.json", r#"{"mcpServers": {"m": {"command": "a"}}}"#);
    import.extend(read(
        "b.json",
        r#"{"mcpServers": {"m": {"command": "b"}, "same": {"command": "s"}}}"#,
    ));
    import.extend(read(
        "c.json",
        r#"{"mcpServers": {"same": {"command": "s"}}}"#,
    ));
    assert_eq!(
        import
            .merge("config.toml", None, OnClash::Refuse)
            .unwrap_err()
            .to_string(),
        "server `m` from b.json: another imported server is named `m`; nothing was written. Rename or remove them in the source or the config, or pass --rename to import them under new names"
    );
    let merged = import.merge("config.toml", None, OnClash::Rename).unwrap();
    assert_eq!(merged.added, ["m", "m-2", "same"]);
    assert_eq!(merged.unchanged, [("same".into(), "same".into())]);
}

#[test]
fn an_existing_config_with_problems_is_not_touched() {
    let import = read("claude.json", CLAUDE);
    let err = import
        .merge(
            "config.toml",
            Some("[server]\nlisten = 4\n"),
            OnClash::Refuse,
        )
        .unwrap_err();
    assert!(
        matches!(&err, MergeError::ExistingInvalid { problems, .. } if problems.len() == 1),
        "{err}"
    );
}

#[test]
fn json_configs_get_a_hint_instead_of_toml_errors() {
    assert_eq!(
        json_config_hint("/tmp/claude_desktop_config.json", CLAUDE).unwrap(),
        "/tmp/claude_desktop_config.json: this looks like a Claude Desktop config (JSON), not Portico's TOML; run `portico import /tmp/claude_desktop_config.json` to turn its servers into a Portico config"
    );
    assert_eq!(
        json_config_hint("/Library/Application Support/x.json", VSCODE).unwrap(),
        "/Library/Application Support/x.json: this looks like a VS Code MCP config (JSON), not Portico's TOML; run `portico import '/Library/Application Support/x.json'` to turn its servers into a Portico config"
    );
    assert_eq!(
        json_config_hint("a.json", "{\"x\": 1}").unwrap(),
        "a.json is JSON, but Portico's config is TOML; `portico init` writes a starter config"
    );
    assert_eq!(json_config_hint("c.toml", crate::STARTER_CONFIG), None);
    assert!(matches!(
        crate::parse("/tmp/c.json", CLAUDE),
        Err(crate::ConfigError::NotToml { .. })
    ));
}

#[test]
fn the_starter_config_passes_check_and_keeps_the_default_agent() {
    assert_eq!(crate::check(crate::STARTER_CONFIG), []);
    let starter = crate::parse("starter", crate::STARTER_CONFIG).unwrap();
    let default = crate::parse("default", crate::DEFAULT_CONFIG).unwrap();
    assert_eq!(starter, default);
    assert_eq!(starter.agents[0].name, "assistant");
}

#[test]
fn secret_names_and_variable_names() {
    for secret in [
        "GITHUB_TOKEN",
        "api_key",
        "Authorization",
        "DB_PASSWORD",
        "client-secret",
    ] {
        assert!(is_secret_name(secret), "{secret}");
    }
    for plain in ["LOG_LEVEL", "MODE", "X-Trace", "PATH"] {
        assert!(!is_secret_name(plain), "{plain}");
    }
    assert_eq!(env_var_name("github-token"), "GITHUB_TOKEN");
    assert_eq!(env_var_name("1st"), "MCP_1ST");
    assert_eq!(
        workspace_of(Path::new("/p/.vscode/mcp.json")),
        Some(PathBuf::from("/p"))
    );
    assert_eq!(workspace_of(Path::new("/p/mcp.json")), None);
}

#[test]
fn secrets_are_found_by_form_and_never_share_a_variable_with_another_value() {
    let import = read(
        "claude.json",
        r#"{"mcpServers": {
            "a": {"command": "a", "env": {"GH": "ghp_one", "API_TOKEN": "same"}},
            "b": {"command": "b", "env": {"GH": "ghp_two", "API_TOKEN": "same"}}
        }}"#,
    );
    assert_eq!(
        import.servers[0].env,
        [
            ("GH".into(), "${GH}".into()),
            ("API_TOKEN".into(), "${API_TOKEN}".into())
        ]
    );
    // `b`'s GH is another token: it gets a variable of its own; its API_TOKEN is the same value.
    assert_eq!(
        import.servers[1].env,
        [
            ("GH".into(), "${B_GH}".into()),
            ("API_TOKEN".into(), "${API_TOKEN}".into())
        ]
    );
    let variables: Vec<&str> = import.exports.iter().map(|e| e.variable.as_str()).collect();
    assert_eq!(variables, ["GH", "API_TOKEN", "B_GH"]);
    assert!(!looks_like_secret_value("debug"));
}

#[test]
fn each_client_is_looked_for_where_it_keeps_its_servers() {
    let places = Places {
        home: Some("/h".into()),
        config_dir: Some("/h/.config".into()),
        cwd: Some("/p".into()),
    };
    let paths = |client| -> Vec<String> {
        places
            .of(client)
            .iter()
            .map(|p| p.display().to_string())
            .collect()
    };
    assert_eq!(
        paths(Client::ClaudeDesktop),
        ["/h/.config/Claude/claude_desktop_config.json"]
    );
    assert_eq!(
        paths(Client::Cursor),
        ["/p/.cursor/mcp.json", "/h/.cursor/mcp.json"]
    );
    assert_eq!(
        paths(Client::VsCode),
        [
            "/p/.vscode/mcp.json",
            "/h/.config/Code/User/mcp.json",
            "/h/.config/Code/User/settings.json"
        ]
    );
}

#[test]
fn server_names_with_controls_or_bidi_characters_are_made_safe_or_skipped_and_said_so() {
    let import = read(
        "x.json",
        r#"{"mcpServers": {
            "evil\nERROR forged line": {"command": "a"},
            "My Files \u202eexe": {"command": "b"},
            "\u202e\u0007": {"command": "c"},
            "io.github.ok-name_1": {"command": "d"}
        }}"#,
    );
    let names: Vec<&str> = import.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "evil-ERROR-forged-line",
            "My-Files-exe",
            "io.github.ok-name_1"
        ]
    );
    assert_eq!(
        import.warnings,
        [
            "server `evil\\nERROR forged line` was imported as `evil-ERROR-forged-line`: server names are ASCII letters, digits, `-`, `_` and `.`",
            "server `My Files \\u{202e}exe` was imported as `My-Files-exe`: server names are ASCII letters, digits, `-`, `_` and `.`",
            "server `\\u{202e}\\u{7}` was skipped: its name has none of the characters server names are made of (ASCII letters, digits, `-`, `_`, `.`); rename it in x.json",
        ]
    );
    for warning in &import.warnings {
        assert!(
            !warning.chars().any(portico_core::text::is_invisible),
            "{warning}"
        );
    }
    // What is written passes `config check`.
    let merged = import.merge("config.toml", None, OnClash::Refuse).unwrap();
    assert_eq!(crate::check::check(&merged.text), []);
}
