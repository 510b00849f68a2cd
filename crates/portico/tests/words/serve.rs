//! `portico serve` on a taken port says so in one line; a second `portico serve` beside a running
//! one says Portico is already running, with its pid and address.

use crate::client::*;

#[test]
fn serve_on_a_taken_port_says_so_once_and_never_says_ready() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let home = Home::new(&format!("[server]\nlisten = \"{addr}\"\n"));
    let (code, stdout, stderr) = home.run(&["serve"], &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(
        errors,
        [format!(
            "error: cannot listen on {addr}: another program (or another Portico) is listening there; stop it, or set another address in [server] listen (or `portico serve --listen`)"
        )],
        "{stderr}"
    );
    assert!(!stderr.contains("os error"), "{stderr}");
    assert!(!stderr.contains("shutting down"), "{stderr}");
    assert!(!stderr.contains("portico: ready"), "{stderr}");
    drop(taken);
}

#[test]
fn a_second_serve_says_portico_is_already_running_and_where() {
    let home = Home::new("[server]\nlisten = \"127.0.0.1:0\"\n");
    let mut daemon = Daemon::start(&home);
    // On the same address: without the check, it would fail to listen rather than run forever.
    let addr = daemon.base.trim_start_matches("http://").to_string();
    let (code, stdout, stderr) = home.run(&["serve", "--listen", &addr], &[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(
        stderr,
        format!(
            "error: Portico is already running (pid {}) on {}; stop it first (or give this one its own PORTICO_HOME)\n",
            daemon.child.id(),
            daemon.base
        )
    );
    // The first is untouched.
    assert!(daemon.child.try_wait().unwrap().is_none());
    daemon.stop();
}
