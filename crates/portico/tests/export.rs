//! `portico export claude|cursor|vscode`, through the real binary on copies of the IDEs' own config
//! files in a pretend home: the snippet and the entries to remove; `--write` (the file asserted
//! whole, its backup, a second run that changes nothing); `--dry-run`; a malformed file refused.

#[path = "onramp/machine.rs"]
mod machine;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use machine::Machine;
use serde_json::{Value, json};

/// This test's portico, as the IDE's entry names it.
fn exe() -> String {
    Path::new(env!("CARGO_BIN_EXE_portico"))
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The files in `path`'s directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The backups of `file`, each checked to be named `FILE.portico-backup-YYYYMMDDTHHMMSSZ`.
fn backups(file: &Path) -> Vec<PathBuf> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!("{name}.portico-backup-");
    listing(file.parent().unwrap())
        .into_iter()
        .filter_map(|n| {
            let stamp = n.strip_prefix(&prefix)?.to_string();
            let ok = stamp.len() == 16
                && stamp.as_bytes()[8] == b'T'
                && stamp.ends_with('Z')
                && stamp
                    .chars()
                    .enumerate()
                    .all(|(i, c)| i == 8 || i == 15 || c.is_ascii_digit());
            assert!(ok, "backup named {n}");
            Some(file.with_file_name(n))
        })
        .collect()
}

/// Claude Desktop's config as Claude Desktop writes it (two spaces, no newline at the end), with
/// servers `portico import` brought in and servers it did not.
const CLAUDE: &str = r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_exampleexampleexample"
      }
    },
    "filesystem": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/me/Desktop"
      ]
    },
    "memory": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-memory"
      ]
    },
    "linear": {
      "command": "npx",
      "args": [
        "-y",
        "mcp-remote",
        "https://mcp.linear.app/sse"
      ]
    }
  },
  "globalShortcut": "Alt+Space",
  "isUsingBuiltInNodeForMcp": true
}"#;

/// What was imported earlier: GitHub and memory as Claude runs them, and Linear by its URL (so
/// Claude's `mcp-remote` entry for it is a different server).
const IMPORTED: &str = r#"{
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_exampleexampleexample"}},
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "linear": {"url": "https://mcp.linear.app/sse"}
  }
}"#;

#[test]
fn claude_desktop_config_is_edited_in_place_backed_up_once_and_left_alone_the_second_time() {
    let machine = Machine::new();
    let earlier = machine.project().join("earlier.json");
    machine.write(&earlier, IMPORTED);
    let (code, _, stderr) = machine.portico(&["import", earlier.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let file = machine
        .config_dir()
        .join("Claude/claude_desktop_config.json");
    machine.write(&file, CLAUDE);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let shown = file.display().to_string();
    let exe = exe();

    // Without --write: the snippet, and what to take out so nothing runs twice.
    let (code, stdout, stderr) = machine.portico(&["export", "claude"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!({"mcpServers": {"portico": {"command": exe, "args": ["mcp"]}}})
    );
    assert_eq!(
        stderr,
        format!(
            "Add it to Claude Desktop's config ({shown}) under \"mcpServers\", then restart Claude Desktop.\n\
             Remove these entries from {shown}, Portico serves them now (else they run twice): github, memory\n\
             Or run `portico export claude --write`: it makes the change (after a backup) and shows the diff.\n"
        )
    );

    let diff = format!(
        "--- {shown}\n+++ {shown}\n@@ -1,15 +1,5 @@\n {{\n   \"mcpServers\": {{\n-    \"github\": {{\n-      \"command\": \"npx\",\n-      \"args\": [\n-        \"-y\",\n-        \"@modelcontextprotocol/server-github\"\n-      ],\n-      \"env\": {{\n-        \"GITHUB_PERSONAL_ACCESS_TOKEN\": \"ghp_exampleexampleexample\"\n-      }}\n-    }},\n     \"filesystem\": {{\n       \"command\": \"npx\",\n       \"args\": [\n@@ -18,13 +8,6 @@\n         \"/Users/me/Desktop\"\n       ]\n     }},\n-    \"memory\": {{\n-      \"command\": \"npx\",\n-      \"args\": [\n-        \"-y\",\n-        \"@modelcontextprotocol/server-memory\"\n-      ]\n-    }},\n     \"linear\": {{\n       \"command\": \"npx\",\n       \"args\": [\n@@ -32,6 +15,10 @@\n         \"mcp-remote\",\n         \"https://mcp.linear.app/sse\"\n       ]\n+    }},\n+    \"portico\": {{\n+      \"command\": {exe:?},\n+      \"args\": [\"mcp\"]\n     }}\n   }},\n   \"globalShortcut\": \"Alt+Space\",\n"
    );

    // --dry-run: the diff, and nothing written.
    let before_listing = listing(file.parent().unwrap());
    let (code, stdout, stderr) = machine.portico(&["export", "claude", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, diff);
    assert_eq!(
        stderr,
        format!("portico: dry run, nothing was written to {shown}\n")
    );
    assert_eq!(read(&file), CLAUDE);
    assert_eq!(listing(file.parent().unwrap()), before_listing);

    let (code, stdout, stderr) = machine.portico(&["export", "claude", "--write"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let after = format!(
        r#"{{
  "mcpServers": {{
    "filesystem": {{
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/me/Desktop"
      ]
    }},
    "linear": {{
      "command": "npx",
      "args": [
        "-y",
        "mcp-remote",
        "https://mcp.linear.app/sse"
      ]
    }},
    "portico": {{
      "command": {exe:?},
      "args": ["mcp"]
    }}
  }},
  "globalShortcut": "Alt+Space",
  "isUsingBuiltInNodeForMcp": true
}}"#
    );
    assert_eq!(read(&file), after);
    assert_eq!(mode(&file), 0o640);
    let backup = backups(&file);
    assert_eq!(backup.len(), 1, "{backup:?}");
    assert_eq!(read(&backup[0]), CLAUDE);
    assert_eq!(mode(&backup[0]), 0o640);
    assert_eq!(
        stdout,
        format!(
            "{diff}portico: updated {shown}: added the `portico` entry; removed github, memory, which Portico serves now\n\
             Backup of the old file: {}\n\
             Restart Claude Desktop to use it.\n",
            backup[0].display()
        )
    );
    // Only the file and its backup: no temporary file left behind.
    assert_eq!(
        listing(file.parent().unwrap()),
        [
            "claude_desktop_config.json".to_string(),
            backup[0]
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        ]
    );

    // A second run has nothing to do: no change, no second backup.
    let (code, stdout, stderr) = machine.portico(&["export", "claude", "--write"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        format!(
            "portico: {shown} is already up to date: it starts Portico, and Portico serves none of its other entries\n"
        )
    );
    assert_eq!(read(&file), after);
    assert_eq!(backups(&file), backup);
    let (_, _, stderr) = machine.portico(&["export", "claude"]);
    assert_eq!(
        stderr,
        format!("{shown} has this entry already, and Portico serves none of its other entries.\n")
    );
}

/// VS Code's user mcp.json as a user keeps it: comments, trailing commas, inputs.
const VSCODE: &str = r#"{
	// Asked once, kept by VS Code.
	"inputs": [
		{
			"type": "promptString",
			"id": "github-token",
			"description": "GitHub token",
			"password": true,
		},
	],
	"servers": {
		// GitHub, with the token from the input above.
		"github": {
			"type": "stdio",
			"command": "npx",
			"args": ["-y", "@modelcontextprotocol/server-github"],
			"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${input:github-token}"},
		},
		/* Playwright stays: Portico does not serve it. */
		"playwright": {
			"command": "npx",
			"args": ["@playwright/mcp@latest"],
		},
		"docs": {"type": "http", "url": "https://docs.example.com/mcp"}, // remote docs
	},
}
"#;

const PORTICO_CONFIG: &str = r#"
[[mcp_servers]]
name = "github"
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
[mcp_servers.transport]
type = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[[mcp_servers]]
name = "docs"
[mcp_servers.transport]
type = "sse"
url = "https://docs.example.com/mcp"

[[mcp_servers]]
name = "tasks"
[mcp_servers.transport]
type = "stdio"
command = "node"
args = ["/srv/tasks/server.js"]
"#;

#[test]
fn vs_code_mcp_json_keeps_its_comments_and_trailing_commas_and_a_project_file_is_edited_by_name() {
    let machine = Machine::new();
    machine.write(&machine.project().join("portico.toml"), PORTICO_CONFIG);
    let config = machine.project().join("portico.toml").display().to_string();
    let file = machine.config_dir().join("Code/User/mcp.json");
    machine.write(&file, VSCODE);
    let project = machine.project().join(".vscode/mcp.json");
    let project_text = "{\n  \"servers\": {\n    \"tasks\": {\"command\": \"node\", \"args\": [\"${workspaceFolder}/../../srv/tasks/server.js\"]},\n    \"tasks-here\": {\"command\": \"node\", \"args\": [\"/srv/tasks/server.js\"]}\n  }\n}\n";
    machine.write(&project, project_text);
    let exe = exe();

    let (code, stdout, stderr) =
        machine.portico(&["--config", "portico.toml", "export", "vscode", "--write"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let after = format!(
        r#"{{
	// Asked once, kept by VS Code.
	"inputs": [
		{{
			"type": "promptString",
			"id": "github-token",
			"description": "GitHub token",
			"password": true,
		}},
	],
	"servers": {{
		/* Playwright stays: Portico does not serve it. */
		"playwright": {{
			"command": "npx",
			"args": ["@playwright/mcp@latest"],
		}},
		"portico": {{
			"type": "stdio",
			"command": {exe:?},
			"args": ["--config", {config:?}, "mcp"],
		}},
	}},
}}
"#
    );
    assert_eq!(read(&file), after);
    assert_eq!(read(&backups(&file)[0]), VSCODE);
    let shown = file.display();
    assert!(
        stdout.ends_with(&format!(
            "portico: updated {shown}: added the `portico` entry; removed github, docs, which Portico serves now\n\
             Backup of the old file: {}\n\
             Restart VS Code to use it.\n\
             {} has entries Portico serves too (tasks-here (Portico's `tasks`)); `portico export vscode --file {} --write` removes them.\n",
            backups(&file)[0].display(),
            project.display(),
            project.display(),
        )),
        "{stdout}"
    );
    assert_eq!(read(&project), project_text);

    // The project's file, named: `tasks` there is another path, so only `tasks-here` goes.
    let (code, _, stderr) = machine.portico(&[
        "--config",
        "portico.toml",
        "export",
        "vscode",
        "--file",
        ".vscode/mcp.json",
        "--write",
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        read(&project),
        format!(
            "{{\n  \"servers\": {{\n    \"tasks\": {{\"command\": \"node\", \"args\": [\"${{workspaceFolder}}/../../srv/tasks/server.js\"]}},\n    \"portico\": {{\n      \"type\": \"stdio\",\n      \"command\": {exe:?},\n      \"args\": [\"--config\", {config:?}, \"mcp\"]\n    }}\n  }}\n}}\n"
        )
    );
}

#[test]
fn a_missing_cursor_config_is_created_and_an_old_portico_entry_is_replaced_not_doubled() {
    let machine = Machine::new();
    let file = machine.home().join(".cursor/mcp.json");
    let shown = file.display().to_string();
    let exe = exe();
    let (code, stdout, stderr) = machine.portico(&["export", "cursor", "--write"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let created = format!(
        "{{\n  \"mcpServers\": {{\n    \"portico\": {{\n      \"command\": {exe:?},\n      \"args\": [\n        \"mcp\"\n      ]\n    }}\n  }}\n}}\n"
    );
    assert_eq!(read(&file), created);
    assert_eq!(mode(&file), 0o600);
    let added: String = created.lines().map(|l| format!("+{l}\n")).collect();
    assert_eq!(
        stdout,
        format!(
            "--- /dev/null\n+++ {shown}\n@@ -0,0 +1,10 @@\n{added}portico: wrote {shown} with the `portico` entry\nRestart Cursor to use it.\n"
        )
    );
    assert!(backups(&file).is_empty());

    // An entry from another install (another path) is replaced where it is.
    let old = "{\n  \"mcpServers\": {\n    \"portico\": {\n      \"command\": \"/usr/local/bin/portico\",\n      \"args\": [\"mcp\"]\n    },\n    \"sentry\": {\"url\": \"https://mcp.sentry.dev/mcp\"}\n  }\n}\n";
    machine.write(&file, old);
    let (code, stdout, _) = machine.portico(&["export", "cursor", "--write"]);
    assert_eq!(code, 0);
    assert_eq!(
        read(&file),
        format!(
            "{{\n  \"mcpServers\": {{\n    \"portico\": {{\n      \"command\": {exe:?},\n      \"args\": [\"mcp\"]\n    }},\n    \"sentry\": {{\"url\": \"https://mcp.sentry.dev/mcp\"}}\n  }}\n}}\n"
        )
    );
    assert!(
        stdout.contains(&format!(
            "portico: updated {shown}: replaced the `portico` entry (it started Portico another way)\n"
        )),
        "{stdout}"
    );
}

#[test]
fn a_malformed_config_is_refused_with_its_line_and_column_and_nothing_is_written() {
    let machine = Machine::new();
    let file = machine
        .config_dir()
        .join("Claude/claude_desktop_config.json");
    let broken = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"a\"}\n    \"b\": {\"command\": \"b\"}\n  }\n}\n";
    machine.write(&file, broken);
    for flag in ["--write", "--dry-run"] {
        let (code, stdout, stderr) = machine.portico(&["export", "claude", flag]);
        assert_eq!((code, stdout.as_str()), (1, ""));
        assert_eq!(
            stderr,
            format!(
                "error: {}:4:5: not valid JSON: expected `,` or `}}`; nothing was written. Fix the file (or move it away) and run this again\n",
                file.display()
            )
        );
        assert_eq!(read(&file), broken);
        assert_eq!(
            listing(file.parent().unwrap()),
            ["claude_desktop_config.json"]
        );
    }
    // Without --write the snippet is still printed, and what could not be checked is said.
    let (code, stdout, stderr) = machine.portico(&["export", "claude"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("\"portico\""), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "(Cannot tell which of its entries Portico serves: {}:4:5: not valid JSON: expected `,` or `}}`.)\n",
            file.display()
        )),
        "{stderr}"
    );
}

#[test]
fn export_prints_the_json_that_points_each_ide_at_this_executable() {
    let machine = Machine::new();
    let exe = exe();
    let mcp_servers = format!(
        "{{\n  \"mcpServers\": {{\n    \"portico\": {{\n      \"command\": {exe:?},\n      \"args\": [\n        \"mcp\"\n      ]\n    }}\n  }}\n}}\n"
    );
    let (code, stdout, stderr) = machine.portico(&["export", "claude"]);
    assert_eq!((code, stdout.as_str()), (0, mcp_servers.as_str()));
    assert_eq!(
        stderr,
        format!(
            "Add it to Claude Desktop's config ({}) under \"mcpServers\", then restart Claude Desktop.\n\
             Or run `portico export claude --write`: it makes the change (after a backup) and shows the diff.\n",
            machine
                .config_dir()
                .join("Claude/claude_desktop_config.json")
                .display()
        )
    );
    let (code, stdout, stderr) = machine.portico(&["export", "cursor"]);
    assert_eq!((code, stdout.as_str()), (0, mcp_servers.as_str()));
    assert_eq!(
        stderr,
        format!(
            "Add it to {} (or a project's .cursor/mcp.json) under \"mcpServers\".\n\
             Or run `portico export cursor --write`: it makes the change (after a backup) and shows the diff.\n",
            machine.home().join(".cursor/mcp.json").display()
        )
    );
    let (code, stdout, stderr) = machine.portico(&["export", "vscode"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        format!(
            "{{\n  \"servers\": {{\n    \"portico\": {{\n      \"type\": \"stdio\",\n      \"command\": {exe:?},\n      \"args\": [\n        \"mcp\"\n      ]\n    }}\n  }}\n}}\n"
        )
    );
    assert_eq!(
        stderr,
        format!(
            "Add it to {} (or a project's .vscode/mcp.json) under \"servers\".\n\
             Or run `portico export vscode --write`: it makes the change (after a backup) and shows the diff.\n",
            machine.config_dir().join("Code/User/mcp.json").display()
        )
    );
    // A --config given to export is passed on, absolute, so the IDE's Portico reads the same file.
    machine.write(&machine.project().join("my.toml"), "");
    let (code, stdout, _) = machine.portico(&["--config", "my.toml", "export", "cursor"]);
    assert_eq!(code, 0);
    let snippet: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        snippet["mcpServers"]["portico"]["args"],
        json!([
            "--config",
            machine.project().join("my.toml").display().to_string(),
            "mcp"
        ])
    );
    let (code, _, stderr) = machine.portico(&["export", "zed"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("invalid value 'zed'")
            && stderr.contains("[possible values: claude, cursor, vscode]"),
        "{stderr}"
    );
}
