//! Issue 4 acceptance: collisions, reserved ids, unknown names, the schema
//! cap at 63/64/65 (S5.2, S5.5), and deterministic BM25 ranking over 200
//! realistic plugin tools.

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use agent_capabilities::{EffectSet, Idempotency, Origin, Sensitivity};
use agent_kernel::actor::mailbox;
use agent_kernel::protocol::{TargetRule, ToolDefinition, ToolMsg, ToolResult};
use agent_tools::codes;
use agent_tools::pipeline::ControlError;
use agent_tools::plugin::{PluginManifest, plugin_definitions};
use agent_tools::registry::{
    Exposure, MAX_SCHEMAS_PER_REQUEST, Registry, RegistryError, ToolRegistration,
};
use agent_tools::{spawn_plugin, spawn_tools};
use common::*;

fn builtin_def(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: format!("built-in {name}"),
        parameters: json!({"type": "object"}),
        origin: Origin::Builtin,
        provider: None,
        effects: EffectSet::new(),
        idempotency: Idempotency::Idempotent,
        sensitivity: Sensitivity::Public,
        target: TargetRule::None,
        annotations: None,
    }
}

/// An address nobody answers (registration-only tests never call it).
fn idle_addr() -> agent_kernel::protocol::ToolAddr {
    mailbox::<ToolMsg>("idle", 1).0
}

fn plugin_regs(m: &PluginManifest) -> Vec<ToolRegistration> {
    spawn_plugin(executor(), clock(), m, no_secrets()).unwrap()
}

#[tokio::test]
async fn collision_between_two_providers_names_both_and_changes_nothing() {
    // S5.2/S5.5: duplicate function names are reported, never resolved.
    let mut registry = Registry::new();
    let github = manifest(
        "github",
        "http://127.0.0.1:9/",
        vec![read_fn("create_issue", "Open an issue")],
    );
    let gitlab = manifest(
        "gitlab",
        "http://127.0.0.1:9/",
        vec![read_fn("Create-Issue", "Open an issue")],
    );
    registry.register_all(plugin_regs(&github)).unwrap();
    let before = registry.snapshot();
    let err = registry.register_all(plugin_regs(&gitlab)).unwrap_err();
    assert_eq!(
        err,
        RegistryError::Collision {
            name: "create_issue".into(),
            existing: "plugin:github".into(),
            incoming: "plugin:gitlab".into(),
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("plugin:github") && msg.contains("plugin:gitlab"),
        "{msg}"
    );
    assert_eq!(
        registry.snapshot(),
        before,
        "a refused registration changes nothing"
    );

    // A plugin function with a built-in's registered name collides too.
    registry
        .register(ToolRegistration::builtin(
            builtin_def("convert_units"),
            idle_addr(),
        ))
        .unwrap();
    let clash = manifest(
        "units",
        "http://127.0.0.1:9/",
        vec![read_fn("convert units", "x")],
    );
    let err = registry.register_all(plugin_regs(&clash)).unwrap_err();
    assert!(
        matches!(err, RegistryError::Collision { ref existing, ref incoming, .. }
        if existing == "builtin" && incoming == "plugin:units"),
        "{err}"
    );

    // Through the tools actor the same error comes back.
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    let err = tools.register(plugin_regs(&gitlab)).await.unwrap_err();
    assert!(matches!(
        err,
        ControlError::Registry(RegistryError::Collision { .. })
    ));
}

#[tokio::test]
async fn reserved_builtin_ids_and_names_are_refused() {
    // S5.5: built-in plugin ids are reserved.
    let mut registry = Registry::new();
    for id in ["builtin", "workspace", "fetch", "MCP"] {
        let m = manifest(
            id,
            "http://127.0.0.1:9/",
            vec![read_fn("lookup", "Look up a thing")],
        );
        let err = registry.register_all(plugin_regs(&m)).unwrap_err();
        assert_eq!(
            err,
            RegistryError::ReservedProvider { id: id.into() },
            "{id}"
        );
    }
    for name in [
        "ask_user",
        "search_tools",
        "load_tools",
        "fetch_url",
        "run_javascript",
    ] {
        let m = manifest("acme", "http://127.0.0.1:9/", vec![read_fn(name, "sneaky")]);
        let err = registry.register_all(plugin_regs(&m)).unwrap_err();
        assert_eq!(
            err,
            RegistryError::ReservedName {
                name: name.into(),
                claimed_by: "plugin:acme".into()
            },
            "{name}"
        );
    }
    assert!(registry.snapshot().is_empty());
    // A built-in may not take a discovery tool's name either.
    let err = registry
        .register(ToolRegistration::builtin(
            builtin_def("load_tools"),
            idle_addr(),
        ))
        .unwrap_err();
    assert!(matches!(err, RegistryError::ReservedName { .. }));
}

#[tokio::test]
async fn unknown_and_unloaded_names_are_explicit_errors() {
    let mut registry = Registry::new();
    let m = manifest(
        "crm",
        "http://127.0.0.1:9/",
        vec![read_fn("find_contact", "Find a contact by name")],
    );
    registry.register_all(plugin_regs(&m)).unwrap();
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    let run = Run::new(tools.clone(), "run-unknown");

    let r = run.prepare("c1", "no_such_tool", "{}").await.unwrap_err();
    assert_eq!(code(&r), codes::UNKNOWN_TOOL);
    assert!(text(&r).contains("no_such_tool"));

    let r = run.prepare("c2", "find_contact", "{}").await.unwrap_err();
    assert_eq!(code(&r), codes::TOOL_NOT_LOADED);
    assert!(text(&r).contains("load_tools"));

    let r = run
        .call(
            "c3",
            "load_tools",
            r#"{"names":["find_contact","nope","also_nope"]}"#,
        )
        .await;
    assert_eq!(code(&r), codes::UNKNOWN_TOOL);
    assert!(
        text(&r).contains("nope") && text(&r).contains("also_nope"),
        "{}",
        text(&r)
    );
    assert!(
        tools.loaded(run.run.clone()).await.unwrap().is_empty(),
        "nothing loaded on error"
    );

    let r = run
        .call("c4", "load_tools", r#"{"names":["find_contact"]}"#)
        .await;
    assert!(r.is_success(), "{}", text(&r));
    assert!(
        run.prepare("c5", "find_contact", r#"{"q":"Ada"}"#)
            .await
            .is_ok()
    );
}

/// 10 always-on built-ins + the 2 discovery tools + `n` plugin functions.
async fn cap_fixture(n: usize) -> (agent_tools::ToolsHandle, Run, Vec<String>) {
    let mut registry = Registry::new();
    for i in 0..10 {
        registry
            .register(ToolRegistration::builtin(
                builtin_def(&format!("builtin_{i}")),
                idle_addr(),
            ))
            .unwrap();
    }
    let names: Vec<String> = (0..n).map(|i| format!("fn_{i:02}")).collect();
    let m = manifest(
        "big",
        "http://127.0.0.1:9/",
        names
            .iter()
            .map(|n| read_fn(n, "a loadable function"))
            .collect(),
    );
    registry.register_all(plugin_regs(&m)).unwrap();
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    let run = Run::new(tools.clone(), "run-cap");
    (tools, run, names)
}

fn load_args(names: &[String]) -> String {
    json!({ "names": names }).to_string()
}

#[tokio::test]
async fn schema_cap_at_63_64_and_65() {
    // S5.2: one model request carries at most 64 schemas, built-ins included.
    let (tools, run, names) = cap_fixture(60).await;
    assert_eq!(run.schemas().await.len(), 12);

    // 12 + 51 = 63: below the cap.
    let r = run.call("l1", "load_tools", &load_args(&names[..51])).await;
    assert!(r.is_success(), "{}", text(&r));
    assert_eq!(run.schemas().await.len(), 63);

    // 64: exactly at the cap.
    let r = run
        .call("l2", "load_tools", &load_args(&names[51..52]))
        .await;
    assert!(r.is_success(), "{}", text(&r));
    let schemas = run.schemas().await;
    assert_eq!(schemas.len(), MAX_SCHEMAS_PER_REQUEST);
    let unique: BTreeSet<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(unique.len(), 64);

    // 65: above the cap, an explicit capacity error listing what is loaded.
    let r = run
        .call("l3", "load_tools", &load_args(&names[52..53]))
        .await;
    assert_eq!(code(&r), codes::TOOL_CAPACITY_EXCEEDED);
    let msg = text(&r);
    assert!(msg.contains("65") && msg.contains("64"), "{msg}");
    for loaded in &names[..52] {
        assert!(
            msg.contains(loaded.as_str()),
            "capacity error lists {loaded}: {msg}"
        );
    }
    assert_eq!(run.schemas().await.len(), 64, "nothing was loaded");
    assert_eq!(tools.loaded(run.run.clone()).await.unwrap().len(), 52);
}

#[tokio::test]
async fn one_load_that_would_pass_the_cap_loads_nothing() {
    let (tools, run, names) = cap_fixture(60).await;
    let r = run.call("l1", "load_tools", &load_args(&names[..53])).await;
    assert_eq!(code(&r), codes::TOOL_CAPACITY_EXCEEDED);
    assert!(tools.loaded(run.run.clone()).await.unwrap().is_empty());
    // And exactly 52 in one request fills the cap to 64.
    let r = run.call("l2", "load_tools", &load_args(&names[..52])).await;
    assert!(r.is_success(), "{}", text(&r));
    assert_eq!(run.schemas().await.len(), 64);
}

#[tokio::test]
async fn too_many_always_on_builtins_are_refused_at_registration() {
    let mut registry = Registry::new();
    for i in 0..62 {
        registry
            .register(ToolRegistration::builtin(
                builtin_def(&format!("b_{i}")),
                idle_addr(),
            ))
            .unwrap();
    }
    // 62 + 2 discovery tools = 64 is fine; one more is not.
    let err = registry
        .register(ToolRegistration::builtin(builtin_def("b_62"), idle_addr()))
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::TooManyAlwaysOn { count: 63, .. }),
        "{err}"
    );
}

// ----------------------------------------------------------------------------
// Ranking
// ----------------------------------------------------------------------------

/// 20 services x 10 functions of realistic plugin tools.
const CATALOGUE: &[(&str, &[(&str, &str)])] = &[
    (
        "github",
        &[
            (
                "github_create_issue",
                "Open a new issue in a GitHub repository with a title, body and labels",
            ),
            (
                "github_list_issues",
                "List issues of a GitHub repository, filtered by state, label or assignee",
            ),
            (
                "github_comment_issue",
                "Add a comment to an existing GitHub issue",
            ),
            (
                "github_close_issue",
                "Close a GitHub issue as completed or not planned",
            ),
            (
                "github_list_pull_requests",
                "List open or merged pull requests of a GitHub repository",
            ),
            (
                "github_merge_pull_request",
                "Merge a pull request into its base branch",
            ),
            (
                "github_create_branch",
                "Create a git branch from a commit in a GitHub repository",
            ),
            (
                "github_get_file",
                "Read the contents of a file at a path and ref in a repository",
            ),
            (
                "github_search_code",
                "Search source code across GitHub repositories",
            ),
            (
                "github_list_releases",
                "List published releases and tags of a repository",
            ),
        ],
    ),
    (
        "jira",
        &[
            (
                "jira_create_issue",
                "Create a Jira ticket such as a bug, task or story in a project",
            ),
            (
                "jira_transition_issue",
                "Move a Jira ticket to another workflow status like In Progress or Done",
            ),
            ("jira_assign_issue", "Assign a Jira ticket to a team member"),
            ("jira_search_jql", "Search Jira tickets with a JQL query"),
            (
                "jira_add_worklog",
                "Log hours of work spent on a Jira ticket",
            ),
            (
                "jira_list_sprints",
                "List active and future sprints of a Jira board",
            ),
            (
                "jira_get_issue",
                "Get the fields, status and history of one Jira ticket",
            ),
            (
                "jira_link_issues",
                "Link two Jira tickets as blocks, relates to or duplicates",
            ),
            (
                "jira_create_epic",
                "Create an epic that groups Jira stories",
            ),
            (
                "jira_list_projects",
                "List the Jira projects visible to the account",
            ),
        ],
    ),
    (
        "slack",
        &[
            (
                "slack_post_message",
                "Post a message to a Slack channel or thread",
            ),
            (
                "slack_send_direct_message",
                "Send a private direct message to a Slack user",
            ),
            (
                "slack_list_channels",
                "List public and private Slack channels of the workspace",
            ),
            (
                "slack_search_messages",
                "Search Slack message history by keywords",
            ),
            (
                "slack_add_reaction",
                "Add an emoji reaction to a Slack message",
            ),
            ("slack_set_status", "Set your Slack status text and emoji"),
            (
                "slack_create_channel",
                "Create a new Slack channel and invite members",
            ),
            (
                "slack_upload_snippet",
                "Share a code snippet in a Slack conversation",
            ),
            (
                "slack_pin_message",
                "Pin an important message in a Slack channel",
            ),
            (
                "slack_get_user",
                "Look up a Slack user's profile and timezone",
            ),
        ],
    ),
    (
        "gmail",
        &[
            (
                "gmail_send_email",
                "Send an email to recipients with subject and body from your Gmail account",
            ),
            (
                "gmail_search_inbox",
                "Search emails in the Gmail inbox by sender, subject or date",
            ),
            (
                "gmail_read_email",
                "Read the full text of one email message",
            ),
            (
                "gmail_create_draft",
                "Save an email draft without sending it",
            ),
            ("gmail_add_label", "Apply a label to email conversations"),
            (
                "gmail_archive_email",
                "Archive email conversations out of the inbox",
            ),
            (
                "gmail_list_attachments",
                "List the attachments of an email message",
            ),
            (
                "gmail_create_filter",
                "Create a filter that sorts incoming email automatically",
            ),
            ("gmail_mark_read", "Mark email messages as read or unread"),
            (
                "gmail_forward_email",
                "Forward an email message to another address",
            ),
        ],
    ),
    (
        "calendar",
        &[
            (
                "calendar_create_event",
                "Schedule a meeting or appointment on the calendar with attendees and time",
            ),
            (
                "calendar_list_events",
                "List upcoming calendar events in a date range",
            ),
            (
                "calendar_find_free_time",
                "Find free time slots when all attendees are available",
            ),
            (
                "calendar_update_event",
                "Reschedule or edit an existing calendar event",
            ),
            (
                "calendar_cancel_event",
                "Cancel a calendar event and notify attendees",
            ),
            (
                "calendar_respond_invitation",
                "Accept or decline a meeting invitation",
            ),
            (
                "calendar_list_calendars",
                "List the calendars you can see or edit",
            ),
            (
                "calendar_set_reminder",
                "Set a reminder notification before an event",
            ),
            (
                "calendar_add_attendee",
                "Invite another attendee to an existing meeting",
            ),
            (
                "calendar_create_recurring",
                "Create a recurring event that repeats weekly or monthly",
            ),
        ],
    ),
    (
        "drive",
        &[
            (
                "drive_search_files",
                "Search Google Drive documents, sheets and folders by name or content",
            ),
            (
                "drive_share_file",
                "Share a Drive file with people and set viewer or editor access",
            ),
            ("drive_create_folder", "Create a new folder in Google Drive"),
            ("drive_move_file", "Move a Drive file into another folder"),
            ("drive_export_pdf", "Export a Google Doc as a PDF file"),
            (
                "drive_list_recent",
                "List recently opened or modified Drive files",
            ),
            (
                "drive_create_spreadsheet",
                "Create a new Google Sheets spreadsheet",
            ),
            (
                "drive_append_rows",
                "Append rows of values to a Google Sheets spreadsheet",
            ),
            (
                "drive_read_document",
                "Read the text of a Google Docs document",
            ),
            ("drive_trash_file", "Move a Drive file to the trash"),
        ],
    ),
    (
        "notion",
        &[
            (
                "notion_create_page",
                "Create a Notion page with a title and blocks of content",
            ),
            (
                "notion_query_database",
                "Query a Notion database with filters and sorts",
            ),
            ("notion_update_page", "Update properties of a Notion page"),
            (
                "notion_search",
                "Search Notion pages and databases by title",
            ),
            (
                "notion_append_blocks",
                "Append paragraphs, to-dos or headings to a Notion page",
            ),
            (
                "notion_add_comment",
                "Comment on a Notion page or discussion",
            ),
            (
                "notion_create_database",
                "Create a Notion database with typed properties",
            ),
            (
                "notion_get_page",
                "Retrieve a Notion page and its properties",
            ),
            ("notion_list_users", "List members of the Notion workspace"),
            ("notion_archive_page", "Archive a Notion page"),
        ],
    ),
    (
        "trello",
        &[
            (
                "trello_create_card",
                "Add a card to a list on a Trello board",
            ),
            (
                "trello_move_card",
                "Move a Trello card to another list such as Doing or Done",
            ),
            ("trello_list_boards", "List your Trello boards"),
            (
                "trello_add_checklist",
                "Add a checklist with items to a Trello card",
            ),
            (
                "trello_set_due_date",
                "Set or change the due date of a Trello card",
            ),
            ("trello_add_member", "Add a member to a Trello card"),
            (
                "trello_create_list",
                "Create a list column on a Trello board",
            ),
            ("trello_comment_card", "Write a comment on a Trello card"),
            ("trello_archive_card", "Archive a Trello card"),
            ("trello_search_cards", "Search Trello cards by text"),
        ],
    ),
    (
        "stripe",
        &[
            (
                "stripe_create_refund",
                "Refund a customer payment fully or partially",
            ),
            (
                "stripe_create_invoice",
                "Create and send an invoice to a customer",
            ),
            (
                "stripe_list_charges",
                "List recent card charges and their status",
            ),
            (
                "stripe_create_customer",
                "Create a customer record with email and billing details",
            ),
            (
                "stripe_create_subscription",
                "Subscribe a customer to a recurring price plan",
            ),
            (
                "stripe_cancel_subscription",
                "Cancel a customer's subscription at period end",
            ),
            (
                "stripe_get_balance",
                "Show the available and pending account balance",
            ),
            (
                "stripe_create_payment_link",
                "Create a shareable checkout payment link for a product",
            ),
            (
                "stripe_list_disputes",
                "List chargeback disputes that need evidence",
            ),
            ("stripe_create_coupon", "Create a discount coupon code"),
        ],
    ),
    (
        "shopify",
        &[
            (
                "shopify_list_orders",
                "List store orders with fulfillment and payment status",
            ),
            (
                "shopify_fulfill_order",
                "Mark an order as fulfilled and add tracking number",
            ),
            (
                "shopify_create_product",
                "Add a product with variants, price and images to the store",
            ),
            (
                "shopify_update_inventory",
                "Adjust the stock quantity of a product variant",
            ),
            (
                "shopify_create_discount",
                "Create a store discount for a collection",
            ),
            (
                "shopify_get_customer",
                "Look up a shop customer and their order history",
            ),
            (
                "shopify_cancel_order",
                "Cancel an order and restock its items",
            ),
            (
                "shopify_list_products",
                "List products in the online store catalog",
            ),
            (
                "shopify_create_collection",
                "Group products into a store collection",
            ),
            (
                "shopify_sales_report",
                "Summarise store sales revenue over a period",
            ),
        ],
    ),
    (
        "twilio",
        &[
            (
                "twilio_send_sms",
                "Send a text message SMS to a phone number",
            ),
            (
                "twilio_make_call",
                "Place an outbound voice phone call that reads a message",
            ),
            (
                "twilio_list_messages",
                "List sent and received SMS text messages",
            ),
            (
                "twilio_lookup_number",
                "Look up carrier and line type of a phone number",
            ),
            (
                "twilio_send_whatsapp",
                "Send a WhatsApp message to a phone number",
            ),
            ("twilio_buy_number", "Buy a new phone number in a country"),
            (
                "twilio_list_calls",
                "List recent voice call logs with durations",
            ),
            (
                "twilio_send_verification",
                "Send a one-time verification code for two-factor login",
            ),
            (
                "twilio_check_verification",
                "Check a one-time verification code a user entered",
            ),
            (
                "twilio_get_recording",
                "Fetch the audio recording of a voice call",
            ),
        ],
    ),
    (
        "zendesk",
        &[
            (
                "zendesk_create_ticket",
                "Open a customer support ticket in the help desk",
            ),
            (
                "zendesk_reply_ticket",
                "Reply publicly to a customer on a support ticket",
            ),
            (
                "zendesk_list_tickets",
                "List open support tickets by priority",
            ),
            (
                "zendesk_search_help_center",
                "Search help center knowledge base articles",
            ),
            (
                "zendesk_set_priority",
                "Change the priority of a support ticket",
            ),
            ("zendesk_merge_tickets", "Merge duplicate support tickets"),
            (
                "zendesk_add_internal_note",
                "Add a private internal note to a support ticket",
            ),
            (
                "zendesk_get_satisfaction",
                "Get customer satisfaction ratings for tickets",
            ),
            (
                "zendesk_assign_group",
                "Route a support ticket to an agent group",
            ),
            (
                "zendesk_create_macro",
                "Create a canned response macro for agents",
            ),
        ],
    ),
    (
        "hubspot",
        &[
            (
                "hubspot_create_contact",
                "Create a CRM contact with name, email and company",
            ),
            (
                "hubspot_create_deal",
                "Create a sales deal in a pipeline stage",
            ),
            (
                "hubspot_update_deal_stage",
                "Move a sales deal to another pipeline stage",
            ),
            (
                "hubspot_log_call",
                "Log a sales call note against a CRM contact",
            ),
            ("hubspot_list_companies", "List companies in the CRM"),
            (
                "hubspot_enroll_sequence",
                "Enroll a contact in an email marketing sequence",
            ),
            (
                "hubspot_search_contacts",
                "Search CRM contacts by name or email",
            ),
            (
                "hubspot_create_task",
                "Create a follow-up task for a sales rep",
            ),
            (
                "hubspot_get_analytics",
                "Get website traffic analytics from marketing",
            ),
            (
                "hubspot_create_form",
                "Create a lead capture form for the website",
            ),
        ],
    ),
    (
        "salesforce",
        &[
            (
                "salesforce_create_lead",
                "Create a Salesforce lead from a prospect",
            ),
            (
                "salesforce_convert_lead",
                "Convert a qualified lead into an account and opportunity",
            ),
            (
                "salesforce_run_soql",
                "Run a SOQL query against Salesforce objects",
            ),
            (
                "salesforce_update_opportunity",
                "Update the amount or close date of an opportunity",
            ),
            (
                "salesforce_create_case",
                "Create a Salesforce service case for an account",
            ),
            (
                "salesforce_list_reports",
                "List Salesforce reports and dashboards",
            ),
            (
                "salesforce_get_account",
                "Get a Salesforce account with its contacts",
            ),
            (
                "salesforce_create_campaign",
                "Create a marketing campaign in Salesforce",
            ),
            (
                "salesforce_add_campaign_member",
                "Add a lead or contact to a campaign",
            ),
            (
                "salesforce_forecast",
                "Show the quarterly sales forecast by owner",
            ),
        ],
    ),
    (
        "dropbox",
        &[
            ("dropbox_upload_file", "Upload a file to a Dropbox folder"),
            ("dropbox_download_file", "Download a file from Dropbox"),
            (
                "dropbox_create_shared_link",
                "Create a shared link to a Dropbox file",
            ),
            ("dropbox_list_folder", "List the files in a Dropbox folder"),
            (
                "dropbox_restore_version",
                "Restore an earlier version of a Dropbox file",
            ),
            (
                "dropbox_move_path",
                "Move or rename a file or folder in Dropbox",
            ),
            ("dropbox_search", "Search Dropbox for files by name"),
            (
                "dropbox_get_space_usage",
                "Show how much Dropbox storage space is used",
            ),
            (
                "dropbox_request_files",
                "Request files from others into a Dropbox folder",
            ),
            ("dropbox_delete_path", "Delete a file or folder in Dropbox"),
        ],
    ),
    (
        "spotify",
        &[
            (
                "spotify_play_track",
                "Play a song track on the active Spotify device",
            ),
            ("spotify_pause", "Pause music playback"),
            (
                "spotify_search_catalog",
                "Search songs, albums, artists and podcasts",
            ),
            (
                "spotify_create_playlist",
                "Create a playlist and add songs to it",
            ),
            ("spotify_skip_next", "Skip to the next song in the queue"),
            (
                "spotify_set_volume",
                "Set the playback volume of the speaker",
            ),
            ("spotify_recently_played", "List recently played songs"),
            (
                "spotify_follow_artist",
                "Follow an artist to get release updates",
            ),
            ("spotify_add_to_queue", "Add a song to the playback queue"),
            (
                "spotify_get_recommendations",
                "Recommend songs similar to seed tracks or genres",
            ),
        ],
    ),
    (
        "weather",
        &[
            (
                "weather_current",
                "Current weather conditions, temperature and wind for a city",
            ),
            (
                "weather_forecast",
                "Weather forecast for the next days with rain probability",
            ),
            (
                "weather_air_quality",
                "Air quality index and pollen levels for a location",
            ),
            (
                "weather_alerts",
                "Active severe weather warnings such as storms or floods",
            ),
            (
                "weather_historical",
                "Historical weather observations for a past date",
            ),
            ("weather_uv_index", "UV index and sun protection advice"),
            (
                "weather_marine",
                "Marine conditions: wave height and water temperature",
            ),
            (
                "weather_sunrise_sunset",
                "Sunrise and sunset times for a place and date",
            ),
            ("weather_radar", "Precipitation radar map tiles"),
            (
                "weather_climate_normals",
                "Monthly climate averages for a station",
            ),
        ],
    ),
    (
        "maps",
        &[
            (
                "maps_directions",
                "Driving, walking or transit directions between two addresses",
            ),
            (
                "maps_geocode",
                "Convert a street address into latitude and longitude coordinates",
            ),
            (
                "maps_reverse_geocode",
                "Find the street address at coordinates",
            ),
            (
                "maps_search_places",
                "Find nearby places such as restaurants, pharmacies or cafes",
            ),
            (
                "maps_place_details",
                "Opening hours, phone and reviews of a place",
            ),
            (
                "maps_distance_matrix",
                "Travel times between many origins and destinations",
            ),
            ("maps_timezone", "Time zone of a location"),
            ("maps_elevation", "Elevation above sea level at coordinates"),
            ("maps_static_image", "Render a static map image of an area"),
            ("maps_traffic", "Live traffic congestion on a road"),
        ],
    ),
    (
        "translate",
        &[
            (
                "translate_text",
                "Translate text from one language into another language",
            ),
            (
                "translate_detect_language",
                "Detect which language a text is written in",
            ),
            (
                "translate_list_languages",
                "List supported translation languages",
            ),
            (
                "translate_document",
                "Translate a whole document file preserving its layout",
            ),
            (
                "translate_glossary_create",
                "Create a glossary of fixed term translations",
            ),
            (
                "translate_transliterate",
                "Transliterate text between writing scripts",
            ),
            (
                "translate_speech_to_text",
                "Transcribe spoken audio into text",
            ),
            (
                "translate_text_to_speech",
                "Synthesize speech audio from text",
            ),
            (
                "translate_romanize",
                "Romanize text written in a non-Latin alphabet",
            ),
            (
                "translate_quality_estimate",
                "Estimate the quality of a machine translation",
            ),
        ],
    ),
    (
        "stocks",
        &[
            (
                "stocks_get_quote",
                "Current stock price quote for a ticker symbol",
            ),
            (
                "stocks_price_history",
                "Daily historical share prices of a ticker",
            ),
            (
                "stocks_company_profile",
                "Company profile, sector and market capitalization",
            ),
            (
                "stocks_earnings",
                "Quarterly earnings reports and estimates",
            ),
            ("stocks_dividends", "Dividend payment history of a stock"),
            (
                "stocks_currency_rate",
                "Foreign exchange rate between two currencies",
            ),
            (
                "stocks_crypto_price",
                "Cryptocurrency price such as bitcoin or ether",
            ),
            (
                "stocks_market_news",
                "Latest financial market news headlines",
            ),
            ("stocks_screener", "Screen stocks by valuation ratios"),
            (
                "stocks_index_level",
                "Level of a market index such as the S&P 500",
            ),
        ],
    ),
];

const QUERIES: &[(&str, &str)] = &[
    (
        "send a text message SMS to a phone number",
        "twilio_send_sms",
    ),
    ("weather forecast for the next days", "weather_forecast"),
    ("refund a customer payment", "stripe_create_refund"),
    ("translate text into another language", "translate_text"),
    ("schedule a meeting on my calendar", "calendar_create_event"),
    ("open a new bug ticket in jira", "jira_create_issue"),
    ("post a message to a slack channel", "slack_post_message"),
    (
        "driving directions between two addresses",
        "maps_directions",
    ),
    ("current stock price for a ticker", "stocks_get_quote"),
    ("play a song", "spotify_play_track"),
    ("upload a file to dropbox", "dropbox_upload_file"),
    ("list open pull requests", "github_list_pull_requests"),
    ("send an email", "gmail_send_email"),
    (
        "find free time slots for attendees",
        "calendar_find_free_time",
    ),
    ("bitcoin price", "stocks_crypto_price"),
];

fn catalogue_manifests(reverse: bool) -> Vec<PluginManifest> {
    let mut out: Vec<PluginManifest> = CATALOGUE
        .iter()
        .map(|(id, fns)| {
            let mut functions: Vec<_> = fns.iter().map(|(n, d)| read_fn(n, d)).collect();
            if reverse {
                functions.reverse();
            }
            manifest(id, "http://127.0.0.1:9/", functions)
        })
        .collect();
    if reverse {
        out.reverse();
    }
    out
}

async fn search_all(reverse: bool) -> Vec<Vec<Value>> {
    let mut registry = Registry::new();
    for m in catalogue_manifests(reverse) {
        registry.register_all(plugin_regs(&m)).unwrap();
    }
    let count = registry
        .iter()
        .filter(|t| t.exposure == Exposure::Discoverable)
        .count();
    assert_eq!(count, 200);
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    let run = Run::new(tools, "run-search");
    let mut all = Vec::new();
    for (i, (query, _)) in QUERIES.iter().enumerate() {
        let args = json!({ "query": query, "limit": 5 }).to_string();
        let r = run.call(&format!("s{i}"), "search_tools", &args).await;
        let ToolResult::Success(_) = &r else {
            panic!("{}", text(&r))
        };
        let data: Value = serde_json::from_str(&unfence(&text(&r))).unwrap();
        all.push(data["results"].as_array().unwrap().clone());
    }
    all
}

#[tokio::test]
async fn ranking_over_200_tools_puts_the_intended_tool_first_every_time() {
    // S5.2: search_tools ranks by name and description relevance, deterministically.
    let first = search_all(false).await;
    let mut misses = Vec::new();
    for ((query, intended), hits) in QUERIES.iter().zip(&first) {
        let top = hits
            .first()
            .and_then(|h| h["name"].as_str())
            .unwrap_or("<none>");
        if top != *intended {
            misses.push(format!(
                "{query:?}: got {top}, want {intended}; hits {hits:?}"
            ));
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
    assert!(QUERIES.len() >= 10);
    // Identical across runs, even with registration in the reverse order.
    assert_eq!(first, search_all(false).await);
    assert_eq!(first, search_all(true).await);
}

#[test]
fn catalogue_definitions_are_valid_and_names_unique() {
    let mut names = BTreeSet::new();
    for m in catalogue_manifests(false) {
        for d in plugin_definitions(&m, &*no_secrets()).unwrap() {
            assert!(names.insert(d.name.clone()), "{}", d.name);
        }
    }
    assert_eq!(names.len(), 200);
}

#[tokio::test]
async fn search_limit_and_query_length_at_and_above_their_bounds() {
    use agent_tools::discovery::{MAX_QUERY_BYTES, MAX_SEARCH_LIMIT};
    let mut registry = Registry::new();
    let m = manifest(
        "many",
        "http://127.0.0.1:9/",
        (0..25)
            .map(|i| read_fn(&format!("widget_{i:02}"), "Make a widget"))
            .collect(),
    );
    registry.register_all(plugin_regs(&m)).unwrap();
    let run = Run::new(
        spawn_tools(executor(), clock(), registry, tools_options()),
        "run-limits",
    );
    let search = |limit: usize, query: String| json!({"query": query, "limit": limit}).to_string();
    let r = run
        .call(
            "a",
            "search_tools",
            &search(MAX_SEARCH_LIMIT, "widget".into()),
        )
        .await;
    let data: Value = serde_json::from_str(&unfence(&text(&r))).unwrap();
    assert_eq!(data["results"].as_array().unwrap().len(), MAX_SEARCH_LIMIT);
    let r = run
        .call(
            "b",
            "search_tools",
            &search(MAX_SEARCH_LIMIT + 1, "widget".into()),
        )
        .await;
    assert_eq!(code(&r), codes::INVALID_ARGUMENTS);
    let r = run
        .call("c", "search_tools", &search(0, "widget".into()))
        .await;
    assert_eq!(code(&r), codes::INVALID_ARGUMENTS);
    let r = run
        .call("d", "search_tools", &search(1, "w".repeat(MAX_QUERY_BYTES)))
        .await;
    assert!(r.is_success(), "{}", text(&r));
    let r = run
        .call(
            "e",
            "search_tools",
            &search(1, "w".repeat(MAX_QUERY_BYTES + 1)),
        )
        .await;
    assert_eq!(code(&r), codes::INVALID_ARGUMENTS);
}

#[tokio::test]
async fn mode_and_allowlist_decide_what_a_run_sees() {
    // S5.1: tools per mode and allowlist; research has no dynamic discovery (S9.1).
    let mut registry = Registry::new();
    registry
        .register(ToolRegistration::builtin(builtin_def("notes"), idle_addr()))
        .unwrap();
    registry
        .register(
            ToolRegistration::builtin(builtin_def("read_source"), idle_addr()).in_modes(&[
                agent_kernel::run::RunMode::Agent,
                agent_kernel::run::RunMode::Research,
            ]),
        )
        .unwrap();
    let m = manifest(
        "crm",
        "http://127.0.0.1:9/",
        vec![
            read_fn("crm_find", "Find a contact"),
            read_fn("crm_list", "List contacts"),
        ],
    );
    registry.register_all(plugin_regs(&m)).unwrap();
    let tools = spawn_tools(executor(), clock(), registry, tools_options());

    let names = |s: Vec<agent_kernel::protocol::ModelToolSchema>| {
        s.into_iter().map(|s| s.name).collect::<Vec<_>>()
    };
    let agent = Run::new(tools.clone(), "run-agent");
    assert_eq!(
        names(agent.schemas().await),
        ["notes", "read_source", "load_tools", "search_tools"]
    );

    let mut research = Run::new(tools.clone(), "run-research");
    research.config.mode = agent_kernel::run::RunMode::Research;
    assert_eq!(names(research.schemas().await), ["read_source"]);
    assert_eq!(
        code(&research.prepare("r1", "notes", "{}").await.unwrap_err()),
        codes::TOOL_NOT_ALLOWED
    );
    assert_eq!(
        code(
            &research
                .prepare("r2", "search_tools", r#"{"query":"x"}"#)
                .await
                .unwrap_err()
        ),
        codes::TOOL_NOT_ALLOWED
    );

    let mut narrow = Run::new(tools.clone(), "run-narrow");
    narrow.config.allowlist = Some(["notes".to_owned(), "crm_find".to_owned()].into());
    assert_eq!(
        names(narrow.schemas().await),
        ["notes", "load_tools", "search_tools"]
    );
    let r = narrow
        .call("s", "search_tools", r#"{"query":"contact"}"#)
        .await;
    let data: Value = serde_json::from_str(&unfence(&text(&r))).unwrap();
    let hits: Vec<&str> = data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(hits, ["crm_find"], "search shows only allowlisted tools");
    let r = narrow
        .call("l", "load_tools", r#"{"names":["crm_list"]}"#)
        .await;
    assert_eq!(code(&r), codes::UNKNOWN_TOOL);
    assert_eq!(
        code(&narrow.prepare("n", "read_source", "{}").await.unwrap_err()),
        codes::TOOL_NOT_ALLOWED
    );
}

#[tokio::test]
async fn loaded_tools_are_remembered_for_the_most_recent_runs_only() {
    use agent_tools::pipeline::MAX_TRACKED_RUNS;
    let mut registry = Registry::new();
    registry
        .register_all(plugin_regs(&manifest(
            "crm",
            "http://127.0.0.1:9/",
            vec![read_fn("crm_find", "Find")],
        )))
        .unwrap();
    let tools = spawn_tools(executor(), clock(), registry, tools_options());
    for i in 0..=MAX_TRACKED_RUNS {
        let run = Run::new(tools.clone(), &format!("run-{i:04}"));
        assert!(
            run.call("l", "load_tools", r#"{"names":["crm_find"]}"#)
                .await
                .is_success()
        );
    }
    // 1025 runs: the first is forgotten, the second and the last are kept.
    let loaded =
        |i: usize| tools.loaded(agent_kernel::ids::RunId::new(format!("run-{i:04}")).unwrap());
    assert!(loaded(0).await.unwrap().is_empty());
    assert_eq!(loaded(1).await.unwrap().len(), 1);
    assert_eq!(loaded(MAX_TRACKED_RUNS).await.unwrap().len(), 1);
}

#[test]
fn every_builtin_tool_name_is_reserved() {
    for name in agent_tools::builtin::BUILTIN_TOOL_NAMES {
        assert!(
            agent_tools::registry::RESERVED_TOOL_NAMES.contains(&name),
            "{name}"
        );
    }
}

#[test]
fn every_builtin_exports_a_fingerprinted_builtin_definition_with_a_valid_schema() {
    let defs = agent_tools::builtin::definitions();
    let names: BTreeSet<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        agent_tools::builtin::BUILTIN_TOOL_NAMES
            .into_iter()
            .collect()
    );
    for def in &defs {
        assert_eq!(def.origin, Origin::Builtin, "{}", def.name);
        assert!(def.provider.is_none());
        assert!(def.fingerprint().is_ok());
        jsonschema::validator_for(&def.parameters).unwrap_or_else(|e| panic!("{}: {e}", def.name));
    }
    // Stable: the same definitions give the same fingerprints.
    let again: Vec<_> = agent_tools::builtin::definitions()
        .iter()
        .map(|d| d.fingerprint().expect("fp"))
        .collect();
    let first: Vec<_> = defs.iter().map(|d| d.fingerprint().expect("fp")).collect();
    assert_eq!(first, again);
}

/// A page tool's definition (S5.9): origin `page`, no provider.
fn page_def(name: &str) -> ToolDefinition {
    ToolDefinition {
        origin: Origin::Page,
        description: format!("page tool {name}"),
        ..builtin_def(name)
    }
}

fn page_reg(name: &str) -> ToolRegistration {
    ToolRegistration {
        definition: page_def(name),
        modes: vec![agent_kernel::run::RunMode::Agent],
        exposure: Exposure::AlwaysOn,
        trusted_external: true,
        unknown_function: false,
        needs_grant: None,
        addr: idle_addr(),
    }
}

#[test]
fn page_tools_follow_the_plugins_name_rules() {
    // S5.5, S5.9: a page tool cannot take a built-in's reserved name, a
    // discovery tool's name, or another provider's; a provider id on a
    // page tool is refused; its own set is replaced as a whole.
    let mut registry = Registry::new();
    for reserved in ["fetch_url", "ask_user", "search_tools"] {
        let err = registry.register(page_reg(reserved)).unwrap_err();
        assert!(
            matches!(&err, RegistryError::ReservedName { claimed_by, .. } if claimed_by == "page"),
            "{reserved}: {err}"
        );
    }
    registry
        .register(ToolRegistration::builtin(
            builtin_def("workspace_write"),
            idle_addr(),
        ))
        .unwrap();
    let err = registry.register(page_reg("workspace_write")).unwrap_err();
    assert_eq!(
        err,
        RegistryError::Collision {
            name: "workspace_write".into(),
            existing: "builtin".into(),
            incoming: "page".into(),
        }
    );
    let mut with_provider = page_reg("lookup_order");
    with_provider.definition.provider = Some("page".into());
    assert!(matches!(
        registry.register(with_provider).unwrap_err(),
        RegistryError::ProviderMismatch { .. }
    ));
    registry
        .replace_provider(
            &Origin::Page,
            vec![page_reg("lookup_order"), page_reg("set_banner")],
        )
        .unwrap();
    registry
        .replace_provider(&Origin::Page, vec![page_reg("set_banner")])
        .unwrap();
    let names: Vec<String> = registry.snapshot().into_keys().collect();
    assert_eq!(names, ["set_banner", "workspace_write"]);
}

#[test]
fn a_page_tools_results_are_untrusted_unless_it_declares_user() {
    // S5.4, S5.9: the floor of a page tool is external_untrusted; `user` is
    // the most it may declare (never `internal`).
    use agent_capabilities::Trust;
    use agent_tools::envelope::trust_floor;
    assert_eq!(
        trust_floor(&Origin::Page, Trust::ExternalUntrusted),
        Trust::ExternalUntrusted
    );
    assert_eq!(trust_floor(&Origin::Page, Trust::User), Trust::User);
    assert_eq!(
        trust_floor(&Origin::Page, Trust::Internal),
        Trust::ExternalUntrusted
    );
    assert_eq!("page".parse::<Origin>().unwrap(), Origin::Page);
    assert_eq!(Origin::Page.to_string(), "page");
}
