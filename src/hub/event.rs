//! What goes into an outbox: one committed inbox entry ([`Push`]) and its body, shared
//! by every recipient of a message ([`Event`]).

use std::sync::{Arc, OnceLock};

use switchboard_types::frames::{PushKind, push_text};
use switchboard_types::messages::MessageView;

/// The body of a push: the frame's JSON object without `seq`, or why it could not be
/// rendered.
type Rendered = Result<(PushKind, Box<str>), String>;

/// What an inbox entry becomes on the wire, shared by every recipient of a message.
///
/// The body is rendered when first needed (by the first session that sends it, not by
/// the writer, on whose thread every microsecond is spent in series), then shared.
pub struct Event {
    body: OnceLock<Rendered>,
    render: Box<dyn Fn() -> Rendered + Send + Sync>,
    /// Not news for its recipients (a publish they do not watch): connections that
    /// asked for news only skip it.
    quiet: bool,
    /// The entry as a message, when it is one: transports that write their own format
    /// (STOMP) use it instead of parsing the JSON back.
    message: Option<Arc<MessageView>>,
    /// Committed by another node: only the seq is known here, the session reads the
    /// entry (and what comes before it) from storage.
    stored: bool,
}

impl Event {
    /// An event whose kind and JSON object `render` produces when first needed.
    pub fn new(
        render: impl Fn() -> Result<(PushKind, String), String> + Send + Sync + 'static,
    ) -> Arc<Event> {
        Event::with_news(true, render)
    }

    /// Like [`Event::new`], saying whether the entry is news for its recipients.
    pub fn with_news(
        news: bool,
        render: impl Fn() -> Result<(PushKind, String), String> + Send + Sync + 'static,
    ) -> Arc<Event> {
        Event::build(news, None, render)
    }

    /// Like [`Event::with_news`], for a message whose view `render` renders.
    pub fn with_message(
        news: bool,
        message: Arc<MessageView>,
        render: impl Fn() -> Result<(PushKind, String), String> + Send + Sync + 'static,
    ) -> Arc<Event> {
        Event::build(news, Some(message), render)
    }

    /// An entry another node committed (PostgreSQL with several nodes): the session
    /// sends it, and anything before it it has not sent, from storage.
    pub fn stored() -> Arc<Event> {
        Arc::new(Event {
            body: OnceLock::new(),
            render: Box::new(|| Err("committed on another node: read from storage".into())),
            quiet: false,
            message: None,
            stored: true,
        })
    }

    fn build(
        news: bool,
        message: Option<Arc<MessageView>>,
        render: impl Fn() -> Result<(PushKind, String), String> + Send + Sync + 'static,
    ) -> Arc<Event> {
        Arc::new(Event {
            body: OnceLock::new(),
            render: Box::new(move || render().map(|(kind, body)| (kind, body.into_boxed_str()))),
            quiet: !news,
            message,
            stored: false,
        })
    }

    /// Whether the entry must be read from storage (another node committed it).
    pub fn is_stored(&self) -> bool {
        self.stored
    }

    /// The entry as a message view (without its recipient's `seq`), when it is one.
    pub fn message(&self) -> Option<&Arc<MessageView>> {
        self.message.as_ref()
    }

    /// Whether the entry is news for its recipients.
    pub fn is_news(&self) -> bool {
        !self.quiet
    }

    /// The frame text for one recipient, or why the body could not be rendered (the
    /// session then sends the entry from storage instead).
    pub fn frame(&self, seq: i64) -> Result<String, String> {
        match self.body.get_or_init(|| (self.render)()) {
            Ok((kind, body)) => Ok(push_text(*kind, seq, body)),
            Err(why) => Err(why.clone()),
        }
    }
}

/// One inbox entry on its way to a connection.
#[derive(Clone)]
pub struct Push {
    pub seq: i64,
    pub event: Arc<Event>,
}
