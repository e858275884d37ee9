// The official A2A JavaScript SDK against a Switchboard member, as its users start:
// ClientFactory.createFromUrl(memberUrl), which resolves `.well-known/agent-card.json`
// relative to the URL it is given (RFC 3986), then sends a message on the card's
// JSON-RPC interface. Usage: node card.mjs MEMBER_URL TOKEN; prints one JSON line.
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const [, , memberUrl, token] = process.argv;
// Cards and calls need a credential of the team: every request carries the bearer.
const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  }),
);
const out = { memberUrl };
try {
  const client = await factory.createFromUrl(memberUrl);
  out.card = (await client.getAgentCard()).name;
  const sent = await client.sendMessage({
    message: {
      messageId: `js-${Date.now()}`,
      role: 1, // ROLE_USER
      parts: [{ content: { $case: "text", value: "hello from the JS SDK" } }],
    },
    configuration: { returnImmediately: true },
  });
  out.sent = JSON.parse(JSON.stringify(sent));
} catch (err) {
  out.error = String(err);
}
console.log(JSON.stringify(out));
