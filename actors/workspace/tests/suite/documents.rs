//! The workspace as `extract_document`'s document store
//! (`WorkspaceDocuments`, an `agent_kernel::protocol::DocumentSource`): the
//! path goes through the path gate, the size limit is checked at, below and
//! above, and the file's source decides the trust of its text (S5.4).

use agent_kernel::protocol::{DocumentOrigin, DocumentSource, DocumentSourceError};
use agent_kernel::{CallId, RunId, SessionId};
use agent_workspace::{Quotas, Source, WorkspaceDocuments};

use super::{Env, p, user};

pub fn s5_4_documents_are_read_with_their_origin_and_size_limit() {
    let env = Env::new("s1");
    let dir = env.directory(Quotas::default());
    let ws = dir.get(&env.session).unwrap().workspace;
    env.run(ws.create(
        &p("notes/caf\u{e9}.md"),
        b"hello".to_vec(),
        "text/markdown",
        user(),
    ))
    .unwrap();
    let tool = Source::Tool {
        tool: "workspace_write".into(),
        run: RunId::new("r1").unwrap(),
        call_id: CallId::new("c1").unwrap(),
    };
    env.run(ws.create(&p("out.txt"), b"made".to_vec(), "text/plain", tool))
        .unwrap();
    let import = Source::Import {
        from: "attachment".into(),
    };
    env.run(ws.create(&p("in.csv"), b"a,b".to_vec(), "text/csv", import))
        .unwrap();
    let docs = WorkspaceDocuments::new(dir.clone());
    let read = |path: &str, max: usize| env.run(docs.read(&env.session, path, max));

    // An NFD spelling names the NFC file, through the one path gate.
    let doc = read("notes/cafe\u{301}.md", 1024).unwrap();
    assert_eq!(doc.bytes, b"hello");
    assert_eq!(doc.mime.as_deref(), Some("text/markdown"));
    assert_eq!(doc.origin, DocumentOrigin::User);
    assert_eq!(
        read("out.txt", 1024).unwrap().origin,
        DocumentOrigin::Runtime
    );
    assert_eq!(
        read("in.csv", 1024).unwrap().origin,
        DocumentOrigin::External
    );

    // The size limit: at and above the file's size it reads, below it refuses.
    assert!(read("notes/caf\u{e9}.md", 6).is_ok());
    assert!(read("notes/caf\u{e9}.md", 5).is_ok());
    assert_eq!(
        read("notes/caf\u{e9}.md", 4).unwrap_err(),
        DocumentSourceError::TooLarge {
            path: "notes/caf\u{e9}.md".into(),
            size: 5,
            limit: 4
        }
    );

    // A missing file and a path the gate refuses are both "not found".
    for missing in ["nope.txt", "../etc/passwd", "/abs", ""] {
        assert_eq!(
            read(missing, 1024).unwrap_err(),
            DocumentSourceError::NotFound {
                path: missing.into()
            },
            "{missing:?}"
        );
    }

    // A session whose workspace is not open is unavailable, not missing.
    let other = SessionId::new("s2").unwrap();
    assert!(matches!(
        env.run(docs.read(&other, "notes/caf\u{e9}.md", 1024)),
        Err(DocumentSourceError::Unavailable(_))
    ));
}
