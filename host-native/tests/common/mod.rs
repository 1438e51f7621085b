//! Shared by the native integration tests that drive the `agentrt` binary:
//! a real HTTP server on loopback for it to talk to.

/// Serve `app` on 127.0.0.1 (a free port) on a thread of its own with its
/// own runtime, for as long as the test process lives; returns the port.
pub fn serve_on_loopback(app: axum::Router) -> u16 {
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            port_tx
                .send(listener.local_addr().expect("addr").port())
                .expect("port");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    port_rx.recv().expect("port")
}
