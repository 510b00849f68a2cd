//! The MCP registry: `portico search` through the real binary against the registry fixture
//! (tests/peers/python/registry_server.py serving tests/peers/registry/*.json on 127.0.0.1), the
//! resolver (`portico_registry::Registry::resolve`) against the same fixture, and the fixture's
//! documents held to the published server.json rules.

#[path = "upstreams/support.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use portico_config::import::{ImportedTransport, OnClash};
use portico_registry::{Options, Registry, ResolveError, RunsAs, ServerJson};
use serde_json::Value;
use support::*;

/// The registry fixture on 127.0.0.1, stopped on drop.
struct Fixture {
    _child: StopOnDrop,
    url: String,
}

impl Fixture {
    fn start() -> Fixture {
        let mut child = Command::new(python3())
            .arg(python_peer("registry_server.py"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start registry_server.py");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let child = StopOnDrop(child);
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("registry_server.py printed its URL")
            .trim()
            .to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Fixture { _child: child, url }
    }

    /// A config that points `[registry]` at the fixture.
    fn config(&self) -> String {
        format!(
            "[registry]\nurl = \"{}\"\nallow_private_network = true\n",
            self.url
        )
    }

    fn registry(&self) -> Registry {
        Registry::new(&self.url, true).unwrap()
    }
}

fn fixture_documents() -> Vec<(PathBuf, ServerJson, Value)> {
    let dir = peers_dir().join("registry");
    let mut documents: Vec<(PathBuf, ServerJson, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let typed =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let raw = serde_json::from_str(&text).unwrap();
            (path, typed, raw)
        })
        .collect();
    documents.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(documents.len(), 7);
    documents
}

#[test]
fn search_prints_one_line_per_server_with_what_it_runs_as() {
    let fixture = Fixture::start();
    let (code, stdout, stderr) = run_portico(&fixture.config(), &["search"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "\
NAME                                              VERSION    RUNS AS  DESCRIPTION
com.example.weather/remote                        3.0.1      remote   Hosted weather forecasts over Streamable HTTP; needs a bearer token
io.github.modelcontextprotocol/server-everything  2026.8.31  npm      MCP server that exercises all the features of the MCP protocol
io.github.portico-fixtures/dotnet-tools           2.0.0      -        (Portico cannot run it) .NET project tools; published only as NuGet and MCPB packages
io.github.portico-fixtures/postgres               1.4.0      oci      Read-only SQL over a PostgreSQL database, in a container
io.github.portico-fixtures/time                   0.6.2      pypi     Time and time-zone conversions
io.github.portico-fixtures/weather                1.2.0      npm      Weather forecasts; needs an API key in its environment
"
    );

    // Several words: the registry is asked for the longest, the rest are matched on name and
    // description.
    let (code, stdout, _) = run_portico(&fixture.config(), &["search", "Weather", "token"], &[]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "\
NAME                        VERSION  RUNS AS  DESCRIPTION
com.example.weather/remote  3.0.1    remote   Hosted weather forecasts over Streamable HTTP; needs a bearer token
"
    );

    let (code, stdout, _) = run_portico(&fixture.config(), &["search", "--limit", "2"], &[]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert!(stdout.ends_with("(more match: add words, or raise --limit (now 2))\n"));

    let (code, stdout, _) = run_portico(&fixture.config(), &["search", "no-such-thing"], &[]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        format!(
            "no server in the registry at {} matches `no-such-thing`\n",
            fixture.url
        )
    );
}

#[test]
fn search_json_is_the_found_servers() {
    let fixture = Fixture::start();
    let (code, stdout, stderr) =
        run_portico(&fixture.config(), &["search", "fixtures", "--json"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let found: Value = serde_json::from_str(&stdout).unwrap();
    let rows: Vec<(String, Value, Option<String>)> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["runs_as"].clone(),
                s["offers"].as_str().map(String::from),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "io.github.portico-fixtures/dotnet-tools".to_string(),
                serde_json::json!([]),
                Some("a nuget package `PorticoFixtures.DotnetTools` 2.0.0 and an mcpb package `https://github.com/portico-fixtures/dotnet-tools/releases/download/v2.0.0/dotnet-tools.mcpb` 2.0.0".to_string())
            ),
            ("io.github.portico-fixtures/postgres".to_string(), serde_json::json!(["oci"]), None),
            ("io.github.portico-fixtures/time".to_string(), serde_json::json!(["pypi"]), None),
            ("io.github.portico-fixtures/weather".to_string(), serde_json::json!(["npm"]), None),
        ]
    );
    assert_eq!(found[0]["status"], "active");
    assert_eq!(found[3]["version"], "1.2.0");
}

#[test]
fn a_registry_on_loopback_needs_the_allowance_and_a_dead_one_says_so() {
    let fixture = Fixture::start();
    let config = format!("[registry]\nurl = \"{}\"\n", fixture.url);
    let (code, stdout, stderr) = run_portico(&config, &["search", "time"], &[]);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "error: the registry was refused {}/v0.1/servers?search=time&version=latest&limit=21: 127.0.0.1 is a loopback address; set `allow_private_network = true` under [registry] to allow it\n",
            fixture.url
        )
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead =
        format!("[registry]\nurl = \"http://127.0.0.1:{port}\"\nallow_private_network = true\n");
    let (code, _, stderr) = run_portico(&dead, &["search"], &[]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "error: cannot reach the registry at http://127.0.0.1:{port}/v0.1/servers: connection refused; check [registry] url and the network\n"
        )
    );

    let (code, stdout, stderr) = run_portico(
        "[registry]\nurl = \"registry.example.com\"\n",
        &["config", "check"],
        &[],
    );
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        format!("{stdout}{stderr}")
            .contains("2:7: [registry] url `registry.example.com` is not a URL"),
        "{stdout}{stderr}"
    );
}

#[tokio::test]
async fn a_registry_name_resolves_to_an_entry_that_passes_config_check() {
    let fixture = Fixture::start();
    let registry = fixture.registry();
    let translation = registry
        .resolve(
            "io.github.modelcontextprotocol/server-everything",
            &Options::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            translation.server.name.as_str(),
            translation.version.as_str(),
            translation.runs_as
        ),
        ("server-everything", "2026.8.31", RunsAs::Npm)
    );
    let ImportedTransport::Stdio { command, args, .. } = &translation.server.transport else {
        panic!("not stdio");
    };
    assert_eq!(
        (command.as_str(), args.clone()),
        (
            "npx",
            vec![
                "-y".to_string(),
                "@modelcontextprotocol/server-everything@2026.8.31".to_string()
            ]
        )
    );
    let merged = translation
        .into_import()
        .merge("config.toml", Some(&fixture.config()), OnClash::Refuse)
        .unwrap();
    assert_eq!(
        merged.added_text,
        format!(
            "# Imported from the MCP registry at {}: io.github.modelcontextprotocol/server-everything 2026.8.31\n[[mcp_servers]]\nname = \"server-everything\"\n[mcp_servers.transport]\ntype = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-everything@2026.8.31\"]\n",
            fixture.url
        )
    );
    let (code, stdout, _) = run_portico(&merged.text, &["config", "check"], &[]);
    assert_eq!(code, 0, "{stdout}");

    // An older version, by the API's version route.
    let older = registry
        .version(
            "io.github.modelcontextprotocol/server-everything",
            "2026.1.26",
        )
        .await
        .unwrap();
    assert_eq!(older.server.version, "2026.1.26");
    assert!(!older.meta.official.unwrap().is_latest);
    let missing = registry
        .version("io.github.modelcontextprotocol/server-everything", "1.0.0")
        .await
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!(
            "the registry at {} has no server `io.github.modelcontextprotocol/server-everything` at version 1.0.0",
            fixture.url
        )
    );
}

#[tokio::test]
async fn secrets_are_asked_for_and_referenced_never_written() {
    let fixture = Fixture::start();
    let registry = fixture.registry();
    let remote = registry
        .resolve("com.example.weather/remote", &Options::default())
        .await
        .unwrap();
    let missing: Vec<(&str, bool, Option<&str>)> = remote
        .missing()
        .map(|i| (i.name.as_str(), i.secret, i.variable.as_deref()))
        .collect();
    assert_eq!(missing, vec![("api_token", true, Some("REMOTE_API_TOKEN"))]);
    assert!(remote.writable());

    let options = Options {
        name: Some("weather".into()),
        values: [("WEATHER_API_KEY".to_string(), "wk-123-secret".to_string())].into(),
        ..Options::default()
    };
    let env = registry
        .resolve("io.github.portico-fixtures/weather", &options)
        .await
        .unwrap();
    assert_eq!(env.secrets.len(), 1);
    assert_eq!(env.secrets[0].variable, "WEATHER_API_KEY");
    assert_eq!(env.missing().count(), 0);
    let merged = env
        .into_import()
        .merge("config.toml", Some(&fixture.config()), OnClash::Refuse)
        .unwrap();
    assert!(
        merged.added_text.contains(
            "env = { WEATHER_API_KEY = \"${WEATHER_API_KEY}\", WEATHER_CACHE_DIR = \"/tmp/weather\" }"
        ),
        "{}",
        merged.added_text
    );
    assert!(
        merged.added_text.contains(
            "args = [\"-y\", \"@portico-fixtures/weather-mcp@1.2.0\", \"--units\", \"metric\"]"
        ),
        "{}",
        merged.added_text
    );
    assert!(!merged.text.contains("wk-123-secret"));
    let (code, stdout, _) = run_portico(&merged.text, &["config", "check"], &[]);
    assert_eq!(code, 0, "{stdout}");

    let oci = registry
        .resolve("io.github.portico-fixtures/postgres", &Options::default())
        .await
        .unwrap();
    let ImportedTransport::Stdio { command, args, .. } = &oci.server.transport else {
        panic!("not stdio");
    };
    assert_eq!(command, "docker");
    assert_eq!(
        args,
        &[
            "run",
            "-i",
            "--rm",
            "-e",
            "DATABASE_URL",
            "-e",
            "READ_ONLY",
            "ghcr.io/portico-fixtures/postgres-mcp:1.4.0"
        ]
    );
}

#[tokio::test]
async fn unknown_names_get_suggestions_and_unrunnable_servers_say_what_they_have() {
    let fixture = Fixture::start();
    let registry = fixture.registry();
    let error = registry
        .resolve("io.github.someone/weather", &Options::default())
        .await
        .unwrap_err();
    assert!(matches!(error, ResolveError::Unknown { .. }));
    assert_eq!(
        error.to_string(),
        format!(
            "the registry at {} has no server `io.github.someone/weather`; did you mean com.example.weather/remote, io.github.portico-fixtures/weather? (`portico search WORDS` lists more)",
            fixture.url
        )
    );
    let error = registry
        .resolve("everything", &Options::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "`everything` is not a registry name (a registry name has one `/`, as in io.github.owner/server); did you mean io.github.modelcontextprotocol/server-everything? (`portico search WORDS` lists more)"
    );
    let error = registry
        .resolve(
            "io.github.portico-fixtures/dotnet-tools",
            &Options::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "io.github.portico-fixtures/dotnet-tools 2.0.0 has nothing Portico can run: it offers a nuget package `PorticoFixtures.DotnetTools` 2.0.0 and an mcpb package `https://github.com/portico-fixtures/dotnet-tools/releases/download/v2.0.0/dotnet-tools.mcpb` 2.0.0; Portico runs npm, PyPI and OCI packages over stdio, and remote servers (streamable-http, sse)"
    );
}

/// The fixture's documents follow the published server.json schema (2025-12-11). The schema itself
/// is not vendored here: its rules that matter to a reader are checked one by one.
#[test]
fn the_fixture_documents_follow_the_published_rules() {
    let schema = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";
    let lock: Value = serde_json::from_str(
        &std::fs::read_to_string(peers_dir().join("package-lock.json")).unwrap(),
    )
    .unwrap();
    let everything_version =
        lock["packages"]["node_modules/@modelcontextprotocol/server-everything"]["version"]
            .as_str()
            .unwrap();
    let mut everything_latest = false;
    for (path, typed, raw) in fixture_documents() {
        let file = path.display();
        assert_eq!(raw["$schema"], schema, "{file}");
        assert!(
            portico_registry::registry_name_problem(&typed.name).is_none(),
            "{file}"
        );
        let description = typed.description.chars().count();
        assert!(
            (1..=100).contains(&description),
            "{file}: description of {description}"
        );
        if let Some(title) = &typed.title {
            assert!((1..=100).contains(&title.chars().count()), "{file}");
        }
        assert!(typed.version.len() <= 255 && !typed.version.contains(['^', '~', '>', '<', '*']));
        for package in &typed.packages {
            let kind = package.registry_type.as_str();
            assert!(
                ["npm", "pypi", "oci", "nuget", "mcpb"].contains(&kind),
                "{file}"
            );
            assert!(["stdio", "streamable-http", "sse"].contains(&package.transport.kind.as_str()));
            match kind {
                "npm" | "pypi" | "nuget" => {
                    let version = package
                        .version
                        .as_deref()
                        .unwrap_or_else(|| panic!("{file}"));
                    assert!(version != "latest" && !version.is_empty(), "{file}");
                }
                "oci" => assert!(package.identifier.rsplit('/').next().unwrap().contains(':')),
                _ => {
                    let sha = package
                        .file_sha256
                        .as_deref()
                        .unwrap_or_else(|| panic!("{file}"));
                    assert!(
                        sha.len() == 64
                            && sha
                                .chars()
                                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                    );
                }
            }
            for argument in package
                .package_arguments
                .iter()
                .chain(&package.runtime_arguments)
            {
                match argument.kind.as_str() {
                    "named" => assert!(argument.name.is_some(), "{file}"),
                    "positional" => assert!(
                        argument.value_hint.is_some() || argument.input.value.is_some(),
                        "{file}"
                    ),
                    other => panic!("{file}: argument type {other}"),
                }
            }
        }
        for remote in &typed.remotes {
            assert!(
                ["streamable-http", "sse"].contains(&remote.kind.as_str()),
                "{file}"
            );
            let url = remote.url.as_deref().unwrap();
            assert!(
                url.starts_with("https://") || url.starts_with("http://"),
                "{file}"
            );
        }
        if typed.name == "io.github.modelcontextprotocol/server-everything"
            && typed.version == everything_version
        {
            everything_latest = true;
            assert_eq!(
                typed.packages[0].version.as_deref(),
                Some(everything_version)
            );
        }
    }
    assert!(
        everything_latest,
        "a fixture document pins server-everything at the version in tests/peers/package-lock.json ({everything_version})"
    );
}
