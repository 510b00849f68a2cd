//! Config parsing and `portico config check`, and `portico import` of another client's JSON.

use portico_config::{AgentConfig, Config};

/// `data` is a config file (and, separately, an agents-directory file). Checks what `check`
/// promises: it reports problems with real positions, and text it finds no problem in deserialises,
/// so `portico config check` saying "ok" means the daemon will load the file.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    let lines = text.split('\n').count();

    let problems = portico_config::check(text);
    for problem in &problems {
        // What `portico config check` prints.
        let _ = format!("fuzz.toml:{problem}");
        assert!(
            problem.line >= 1 && problem.line <= lines && problem.column >= 1,
            "problem at {}:{} is outside the {lines}-line text: {problem}",
            problem.line,
            problem.column
        );
    }
    match portico_config::parse("fuzz.toml", text) {
        Ok(config) => {
            assert!(problems.is_empty(), "parse accepted text check refused");
            // The binary resolves these right after loading; none may panic on a valid file.
            let _ = portico_daemon::DoorConfig::from_config(&config);
            let _ = portico_mcp_server::ServerOptions::from_config(&config);
            for agent in &config.agents {
                let _ = portico_config::agent_tool_name(&agent.name);
            }
        }
        Err(error) => {
            assert!(
                !problems.is_empty(),
                "`config check` found no problem in text the loader refuses: {error}"
            );
            let _ = error.to_string();
        }
    }
    if problems.is_empty() {
        toml::from_str::<Config>(text).expect("text `check` accepts deserialises");
    }

    let agent_problems = portico_config::check_agent_file(text);
    if agent_problems.is_empty() {
        toml::from_str::<AgentConfig>(text).expect("an agent file `check` accepts deserialises");
    }
    for problem in &agent_problems {
        let _ = problem.to_string();
    }
    import(text);
}

/// The same text as another client's JSON config: whatever `portico import` makes of it, what it
/// would write passes `config check`.
fn import(text: &str) {
    use portico_config::import::{OnClash, SourceFile, translate};
    let _ = portico_config::json_config_hint("fuzz.json", text);
    let file = SourceFile {
        origin: "fuzz.json",
        text,
        workspace: Some(std::path::Path::new("/work")),
        home: Some(std::path::Path::new("/home/me")),
    };
    let Ok(imported) = translate(&file) else {
        return;
    };
    for on_clash in [OnClash::Refuse, OnClash::Rename] {
        match imported.merge("fuzz.toml", None, on_clash) {
            Ok(merged) => assert!(
                portico_config::check(&merged.text).is_empty(),
                "an import wrote a config `check` refuses:\n{}",
                merged.text
            ),
            Err(error) => {
                let _ = error.to_string();
            }
        }
    }
}
