// Sends a chat to an AI SDK UI-message-stream endpoint with the AI SDK's own DefaultChatTransport and
// reads the answer with its readUIMessageStream, printing the assembled UI message as JSON.
//
//   node ai_sdk_read.mjs URL PLAN_JSON
//
// PLAN_JSON: {"chatId": "...", "headers": {...}, "messages": [UIMessage, ...]}
// Output: {"message": <the last UIMessage snapshot>, "errors": [<error texts>], "failure": <text|null>}
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [url, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const transport = new DefaultChatTransport({ api: url, headers: plan.headers ?? {} });
const errors = [];
let message = null;
let failure = null;
try {
  const stream = await transport.sendMessages({
    chatId: plan.chatId,
    messages: plan.messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  for await (const snapshot of readUIMessageStream({ stream, onError: (e) => errors.push(String(e.message ?? e)) })) {
    message = snapshot;
  }
} catch (error) {
  failure = String(error && error.message ? error.message : error);
}
process.stdout.write(JSON.stringify({ message, errors, failure }) + "\n");
