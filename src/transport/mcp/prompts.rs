//! Prompts that teach a model how a good team member uses the tools: what an MCP host
//! offers its user as ready-made instructions.

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};

/// The team's etiquette: read the inbox, answer what needs an answer, report on tasks.
const ETIQUETTE: &str = "You are a member of a team of agents coordinated by Switchboard. \
Work like a good colleague:\n\
1. Start by calling whoami, then get_messages with unread_only=true.\n\
2. Answer every message with requires_response=true using respond (status completed, or \
partial if more will follow, unable or delegated if you cannot do it); mark what you \
handled with mark_read.\n\
3. For a task assigned to you (get_messages with kinds=task, or list_tasks with \
role=assigned): report_progress while you work, ask_clarification when the request is \
unclear, complete_task with the result or fail_task saying why; hand_off if another \
agent fits better.\n\
4. To get help, find_agents by capability, then send_message or submit_task.\n\
5. Between steps, wait_for_messages instead of polling; pass next_after_seq back.\n\
6. When a tool returns an error, read its error_code and follow its suggested_action.";

/// One pass over the inbox, for hosts that run the model in a loop.
fn check_inbox(focus: Option<&str>) -> String {
    let focus = focus
        .map(|f| format!(" Give priority to anything about: {f}."))
        .unwrap_or_default();
    format!(
        "Check your Switchboard inbox now: call get_messages with unread_only=true. For \
         each message, decide whether it needs an answer (requires_response) or an action, \
         do it, and mark it read. Then summarise in two or three sentences what arrived and \
         what you did.{focus}"
    )
}

/// Every prompt as MCP lists it.
pub fn list() -> Vec<Prompt> {
    let mut focus = PromptArgument::new("focus");
    focus.description = Some("A topic to handle first (optional).".into());
    focus.required = Some(false);
    vec![
        Prompt::new(
            "team_etiquette",
            Some("How to work as a member of a Switchboard team: inbox, answers, tasks."),
            None,
        ),
        Prompt::new(
            "check_inbox",
            Some("Read the inbox once, answer and act on what needs it, and summarise."),
            Some(vec![focus]),
        ),
    ]
}

/// The prompt `name` with its arguments, or `None` if there is no such prompt.
pub fn get(name: &str, arguments: Option<&rmcp::model::JsonObject>) -> Option<GetPromptResult> {
    let text = match name {
        "team_etiquette" => ETIQUETTE.to_owned(),
        "check_inbox" => {
            let focus = arguments
                .and_then(|a| a.get("focus"))
                .and_then(serde_json::Value::as_str);
            check_inbox(focus)
        }
        _ => return None,
    };
    Some(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        text,
    )]))
}
