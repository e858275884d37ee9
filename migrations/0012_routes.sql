-- Routing when an agent is connected several ways (AEA's precedence, adapted).
--
-- via:   the transport a message arrived by (NULL for messages the server wrote itself,
--        such as task notifications, and for messages older than this migration). A
--        reply addressed only to the original's sender goes back this way when it is a
--        live transport (WebSocket or STOMP; REST and MCP calls are not).
-- route: the only live transport the message is pushed and replayed by (the sender's
--        explicit choice, or the reply rule above); NULL means every live connection.
--        The message stays in the inbox (GET_MESSAGES) whatever its route.
ALTER TABLE messages ADD COLUMN via TEXT CHECK (via IN ('rest', 'websocket', 'stomp', 'mcp'));
ALTER TABLE messages ADD COLUMN route TEXT CHECK (route IN ('websocket', 'stomp'));
