use std::path::Path;

use super::*;

const PORTICO: &str = r#"
[[mcp_servers]]
name = "github"
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_PERSONAL_ACCESS_TOKEN}" }
[mcp_servers.transport]
type = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[[mcp_servers]]
name = "mem"
[mcp_servers.transport]
type = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-memory"]

[[mcp_servers]]
name = "remote"
[mcp_servers.transport]
type = "http"
url = "https://mcp.example.com/mcp"

[[mcp_servers]]
name = "off"
enabled = false
[mcp_servers.transport]
type = "stdio"
command = "uvx"
args = ["mcp-server-time"]

[[mcp_servers]]
name = "project"
[mcp_servers.transport]
type = "stdio"
command = "node"
args = ["/work/project/server.js"]
"#;

fn config() -> Config {
    crate::parse("config.toml", PORTICO).unwrap_or_else(|e| panic!("{e}"))
}

fn launch() -> Launch {
    Launch {
        command: "/opt/bin/portico".into(),
        args: vec!["mcp".into()],
    }
}

fn file(text: &str) -> SourceFile<'_> {
    SourceFile {
        origin: "mcp.json",
        text,
        workspace: Some(Path::new("/work/project")),
        home: Some(Path::new("/home/me")),
    }
}

fn run(client: Client, text: &str) -> Exported {
    export(client, Some(&file(text)), &config(), &launch()).unwrap_or_else(|e| panic!("{e}"))
}

fn names(removed: &[Served]) -> Vec<(&str, &str)> {
    removed
        .iter()
        .map(|s| (s.entry.as_str(), s.server.as_str()))
        .collect()
}

#[test]
fn claude_entries_portico_serves_go_the_rest_stays_and_portico_comes_last() {
    let before = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_s3cret"
      }
    },
    "memory": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-memory"
      ]
    },
    "time": {
      "command": "uvx",
      "args": [
        "mcp-server-time"
      ]
    }
  },
  "preferences": {
    "menuBarEnabled": false
  }
}
"#;
    let exported = run(Client::ClaudeDesktop, before);
    assert_eq!(
        exported.text,
        r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "time": {
      "command": "uvx",
      "args": [
        "mcp-server-time"
      ]
    },
    "portico": {
      "command": "/opt/bin/portico",
      "args": ["mcp"]
    }
  },
  "preferences": {
    "menuBarEnabled": false
  }
}
"#
    );
    // `time` is in Portico's config too, but disabled there: the client's entry still runs it.
    assert_eq!(
        names(&exported.removed),
        [("github", "github"), ("memory", "mem")]
    );
    assert_eq!(exported.entry, EntryChange::Added);
    let again = run(Client::ClaudeDesktop, &exported.text);
    assert_eq!(again.text, exported.text);
    assert_eq!(
        (again.removed, again.entry),
        (vec![], EntryChange::Unchanged)
    );
}

#[test]
fn vs_code_comments_trailing_commas_and_tabs_are_kept() {
    let before = "{\n\t// Inputs VS Code asks for.\n\t\"inputs\": [\n\t\t{\"id\": \"token\", \"type\": \"promptString\", \"password\": true},\n\t],\n\t\"servers\": {\n\t\t// The GitHub one.\n\t\t// (two lines about it)\n\t\t\"github\": {\n\t\t\t\"command\": \"npx\",\n\t\t\t\"args\": [\"-y\", \"@modelcontextprotocol/server-github\"],\n\t\t\t\"env\": {\"GITHUB_PERSONAL_ACCESS_TOKEN\": \"${input:token}\"},\n\t\t},\n\n\t\t// Kept: a section header, a blank line away.\n\n\t\t\"remote\": {\"type\": \"http\", \"url\": \"https://mcp.example.com/mcp\"}, // the remote one\n\t\t\"mine\": {\"type\": \"stdio\", \"command\": \"./mine\"}, /* mine */\n\t},\n}\n";
    let exported = run(Client::VsCode, before);
    assert_eq!(
        exported.text,
        "{\n\t// Inputs VS Code asks for.\n\t\"inputs\": [\n\t\t{\"id\": \"token\", \"type\": \"promptString\", \"password\": true},\n\t],\n\t\"servers\": {\n\t\t// Kept: a section header, a blank line away.\n\n\t\t\"mine\": {\"type\": \"stdio\", \"command\": \"./mine\"}, /* mine */\n\t\t\"portico\": {\n\t\t\t\"type\": \"stdio\",\n\t\t\t\"command\": \"/opt/bin/portico\",\n\t\t\t\"args\": [\"mcp\"],\n\t\t},\n\t},\n}\n"
    );
    assert_eq!(
        names(&exported.removed),
        [("github", "github"), ("remote", "remote")]
    );
}

#[test]
fn an_old_portico_entry_is_replaced_where_it_stands() {
    let before = "{\n  \"mcpServers\": {\n    \"portico\": {\"command\": \"portico\", \"args\": [\"mcp\"]},\n    \"other\": {\"command\": \"other\"}\n  }\n}";
    let exported = run(Client::Cursor, before);
    assert_eq!(
        exported.text,
        "{\n  \"mcpServers\": {\n    \"portico\": {\n      \"command\": \"/opt/bin/portico\",\n      \"args\": [\"mcp\"]\n    },\n    \"other\": {\"command\": \"other\"}\n  }\n}"
    );
    assert_eq!(exported.entry, EntryChange::Replaced);
    // The same entry written another way is left as the user wrote it.
    let compact =
        "{\"mcpServers\": {\"portico\": {\"args\": [\"mcp\"], \"command\": \"/opt/bin/portico\"}}}";
    let same = run(Client::Cursor, compact);
    assert_eq!(
        (same.text.as_str(), same.entry),
        (compact, EntryChange::Unchanged)
    );
}

#[test]
fn a_file_without_servers_gets_them_and_a_one_line_file_gets_lines() {
    assert_eq!(
        run(
            Client::ClaudeDesktop,
            "{\n    \"globalShortcut\": \"\"\n}\n"
        )
        .text,
        "{\n    \"globalShortcut\": \"\",\n    \"mcpServers\": {\n        \"portico\": {\n            \"command\": \"/opt/bin/portico\",\n            \"args\": [\"mcp\"]\n        }\n    }\n}\n"
    );
    assert_eq!(
        run(Client::Cursor, "{\"mcpServers\": {}}").text,
        "{\n  \"mcpServers\": {\n    \"portico\": {\n      \"command\": \"/opt/bin/portico\",\n      \"args\": [\"mcp\"]\n    }\n  }\n}"
    );
    assert_eq!(
        run(Client::Cursor, "{\r\n  \"mcpServers\": {\r\n  }\r\n}\r\n").text,
        "{\r\n  \"mcpServers\": {\r\n    \"portico\": {\r\n      \"command\": \"/opt/bin/portico\",\r\n      \"args\": [\"mcp\"]\r\n    }\r\n  }\r\n}\r\n"
    );
}

#[test]
fn a_new_or_empty_file_is_the_snippet() {
    let snippet = "{\n  \"servers\": {\n    \"portico\": {\n      \"type\": \"stdio\",\n      \"command\": \"/opt/bin/portico\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}\n";
    let new = export(Client::VsCode, None, &config(), &launch()).unwrap();
    assert_eq!(
        (new.text.as_str(), new.entry),
        (snippet, EntryChange::Added)
    );
    assert_eq!(run(Client::VsCode, " \n").text, snippet);
}

#[test]
fn vs_code_settings_json_is_edited_under_mcp() {
    let before = "{\n  \"editor.fontSize\": 13,\n  \"mcp\": {\n    \"servers\": {\n      \"mem\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]}\n    }\n  }\n}\n";
    assert_eq!(
        run(Client::VsCode, before).text,
        "{\n  \"editor.fontSize\": 13,\n  \"mcp\": {\n    \"servers\": {\n      \"portico\": {\n        \"type\": \"stdio\",\n        \"command\": \"/opt/bin/portico\",\n        \"args\": [\"mcp\"]\n      }\n    }\n  }\n}\n"
    );
}

#[test]
fn servers_are_matched_after_the_translation_import_makes() {
    // `${workspaceFolder}` is what the project's file says; Portico's config has the path.
    let text =
        r#"{"servers": {"p": {"command": "node", "args": ["${workspaceFolder}/server.js"]}}}"#;
    let found = served(Client::VsCode, &file(text), &config()).unwrap();
    assert_eq!(names(&found), [("p", "project")]);
    // A different argument is a different server; so is a URL Portico does not serve.
    let text = r#"{"mcpServers": {
        "a": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github", "--read-only"]},
        "b": {"url": "https://mcp.example.com/other"},
        "portico": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
    }}"#;
    assert_eq!(
        served(Client::Cursor, &file(text), &config()).unwrap(),
        vec![]
    );
    // Claude's and Cursor's key is `mcpServers`: a `servers` there is not theirs.
    let text = r#"{"servers": {"mem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}"#;
    assert_eq!(
        served(Client::Cursor, &file(text), &config()).unwrap(),
        vec![]
    );
}

#[test]
fn what_cannot_be_edited_is_refused_with_where() {
    let err = |client, text| export(client, Some(&file(text)), &config(), &launch()).unwrap_err();
    assert_eq!(
        err(
            Client::ClaudeDesktop,
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n    \"b\": 1\n  }\n}"
        )
        .to_string(),
        "mcp.json:4:5: not valid JSON: expected `,` or `}`"
    );
    assert_eq!(
        err(Client::ClaudeDesktop, "[1]").to_string(),
        "mcp.json holds an array, not a JSON object"
    );
    assert_eq!(
        err(Client::VsCode, "{\"servers\": []}").to_string(),
        "mcp.json: `servers` is an array, not an object of servers by name"
    );
}

#[test]
fn the_comment_lines_above_a_removed_entry_go_with_it() {
    let removed = r#"{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}"#;
    let kept = r#"{"command": "kept"}"#;
    let cases = [
        // Line comments right after `{`, the next entry behind a block comment.
        (
            format!(
                "{{\n  \"mcpServers\": {{\n    // one\n    // two\n    \"m\": {removed},\n    /* k */\n    \"k\": {kept}\n  }}\n}}\n"
            ),
            format!(
                "{{\n  \"mcpServers\": {{\n    /* k */\n    \"k\": {kept},\n    \"portico\": {{\n      \"command\": \"/opt/bin/portico\",\n      \"args\": [\"mcp\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        // A block comment line after another entry; its trailing comment stays with it.
        (
            format!(
                "{{\n  \"mcpServers\": {{\n    \"k\": {kept}, // k\n    /* m */\n    \"m\": {removed} // m\n  }}\n}}\n"
            ),
            format!(
                "{{\n  \"mcpServers\": {{\n    \"k\": {kept}, // k\n    \"portico\": {{\n      \"command\": \"/opt/bin/portico\",\n      \"args\": [\"mcp\"]\n    }}\n  }}\n}}\n"
            ),
        ),
        // A comment a blank line away is about more than the entry: it stays, with the blank line
        // (the new entry goes after the last entry, so before it).
        (
            format!(
                "{{\n  \"mcpServers\": {{\n    \"k\": {kept},\n\n    // npm servers\n\n    // m\n    \"m\": {removed}\n  }}\n}}\n"
            ),
            format!(
                "{{\n  \"mcpServers\": {{\n    \"k\": {kept},\n    \"portico\": {{\n      \"command\": \"/opt/bin/portico\",\n      \"args\": [\"mcp\"]\n    }}\n\n    // npm servers\n  }}\n}}\n"
            ),
        ),
    ];
    for (before, after) in cases {
        let exported = run(Client::Cursor, &before);
        assert_eq!(exported.text, after, "from:\n{before}");
        assert_eq!(names(&exported.removed), [("m", "mem")]);
    }
}
