// The chat page: one conversation with this server through its public API,
// like any other client. Each question is one streamed POST to
// /v1/chat/completions carrying the conversation's X-Session-ID (the server
// keeps the history, so only the new message is sent) and asking for the
// hermes.tool.* events, which show the server's own tool runs, the
// hermes.context.compacted event (a divider where the conversation was
// summarised to fit the model's context), and the
// hermes.approval.* events: a command that needs a person's yes shows with
// Approve / Deny buttons, which answer with POST /v1/approvals/{id} while the
// turn waits. Stop aborts the fetch: closing the connection is what cancels
// the turn on the server (and any question it waits on).
//
// The API key, when the server has one, is asked for on the first 401 and
// kept in sessionStorage only: gone with the tab, never in localStorage or a
// cookie.

import { renderMarkdown } from "./markdown.js";

const KEY_STORAGE = "hermes-trio.api-key";
// Each refused key asks again; a person gives up long before this.
const MAX_KEY_PROMPTS = 50;
// How close to the bottom (px) counts as "reading the newest text".
const STICK_DISTANCE = 48;

const $ = (id) => document.getElementById(id);
const ui = {
  log: $("log"),
  messages: $("messages"),
  empty: $("empty"),
  model: $("model"),
  newChat: $("new-chat"),
  composer: $("composer"),
  prompt: $("prompt"),
  send: $("send"),
  stop: $("stop"),
  keyDialog: $("key-dialog"),
  keyForm: $("key-form"),
  keyInput: $("key-input"),
  keyError: $("key-error"),
  keyCancel: $("key-cancel"),
};

const state = {
  sessionId: newSessionId(),
  model: "",
  running: null,
};

/** No key was given, so the request cannot be made. */
class KeyMissing extends Error {}

// crypto.randomUUID exists only in secure contexts; a server reached over
// plain http on another name is not one, getRandomValues works everywhere.
function newSessionId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return "page-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// ---- the API key ----

let keyWaiters = [];

/** Show the key dialog; resolves true once a key was stored, false if cancelled. */
function askForKey(problem) {
  ui.keyError.textContent = problem || "";
  ui.keyError.hidden = !problem;
  ui.keyInput.value = "";
  if (!ui.keyDialog.open) ui.keyDialog.showModal();
  ui.keyInput.focus();
  return new Promise((resolve) => keyWaiters.push(resolve));
}

function keyAnswered(given) {
  const waiters = keyWaiters;
  keyWaiters = [];
  if (ui.keyDialog.open) ui.keyDialog.close();
  for (const resolve of waiters) resolve(given);
  ui.prompt.focus();
}

ui.keyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const key = ui.keyInput.value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY_STORAGE, key);
  keyAnswered(true);
});
ui.keyCancel.addEventListener("click", () => keyAnswered(false));
// Escape closes a modal dialog by itself: that is a "no" too.
ui.keyDialog.addEventListener("close", () => {
  if (keyWaiters.length) keyAnswered(false);
});

/** The OpenAI error JSON's message, or what HTTP said. */
async function errorMessage(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch {
    // Not JSON: a proxy's page, say.
  }
  return `HTTP ${response.status} ${response.statusText}`.trim();
}

/** fetch() with the stored key; a 401 asks for a key and tries again. */
async function apiFetch(path, init) {
  for (let prompts = 0; prompts < MAX_KEY_PROMPTS; prompts += 1) {
    const headers = new Headers(init.headers || {});
    const key = sessionStorage.getItem(KEY_STORAGE);
    if (key) headers.set("Authorization", `Bearer ${key}`);
    const response = await fetch(path, { ...init, headers });
    if (response.status !== 401) return response;
    const message = await errorMessage(response);
    if (key) sessionStorage.removeItem(KEY_STORAGE);
    const problem = key ? `The server refused this key: ${message}` : "";
    if (!(await askForKey(problem))) throw new KeyMissing(message);
  }
  throw new KeyMissing("too many refused keys");
}

// ---- the model's name ----

async function loadModel() {
  try {
    const response = await apiFetch("/v1/models", {});
    if (!response.ok) {
      ui.model.textContent = "";
      ui.model.title = await errorMessage(response);
      return;
    }
    const body = await response.json();
    state.model = (body.data && body.data[0] && body.data[0].id) || "";
    ui.model.textContent = state.model;
  } catch (error) {
    ui.model.textContent = error instanceof KeyMissing ? "no API key" : "";
    ui.model.title = error.message;
  }
}

// ---- server-sent events ----

/** Server-sent events from text pieces (fields as the SSE standard reads them). */
class SSEParser {
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.buffer = "";
    this.type = "";
    this.data = [];
  }

  feed(text) {
    this.buffer += text;
    const lines = this.buffer.split("\n");
    this.buffer = lines.pop();
    for (const line of lines) this.line(line.endsWith("\r") ? line.slice(0, -1) : line);
  }

  line(line) {
    if (line === "") {
      if (this.data.length) {
        this.onEvent({ type: this.type || "message", data: this.data.join("\n") });
      }
      this.type = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return; // a comment: the keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.type = value;
  }
}

async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SSEParser(onEvent);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
    parser.feed(decoder.decode() + "\n");
  } finally {
    reader.releaseLock();
  }
}

// ---- the conversation view ----

function nearBottom() {
  const log = ui.log;
  return log.scrollHeight - log.scrollTop - log.clientHeight < STICK_DISTANCE;
}

function scrollDown() {
  ui.log.scrollTop = ui.log.scrollHeight;
}

/** 950, 1.2k, 41k, 1.5M: as the chats and the terminal say it. */
function shortTokens(value) {
  let n = Math.max(0, Math.floor(Number(value) || 0));
  for (const [size, unit] of [[1e6, "M"], [1e3, "k"]]) {
    if (n >= size) {
      const v = n / size;
      if (unit === "k" && Math.round(v) >= 1000) return shortTokens(1e6);
      return v < 9.95 ? `${+v.toFixed(1)}${unit}` : `${Math.round(v)}${unit}`;
    }
  }
  return String(n);
}

function seconds(value) {
  return value < 10 ? `${value.toFixed(2)} s` : `${Math.round(value)} s`;
}

/** One question and its answer as they appear in the log. */
class Exchange {
  constructor(question) {
    const stick = nearBottom();
    const user = element("article", "msg user");
    user.append(element("div", "bubble", question));
    this.node = element("article", "msg assistant");
    this.node.dataset.state = "waiting";
    this.body = element("div", "body");
    this.node.append(this.body);
    ui.messages.append(user, this.node);
    ui.empty.hidden = true;
    this.segment = null;
    this.dirty = new Set();
    this.tools = new Map();
    this.approvals = new Map();
    this.frame = 0;
    this.sawDone = false;
    this.finishReason = null;
    if (stick) scrollDown();
  }

  handle(event) {
    if (event.type === "message") {
      this.message(event.data);
    } else if (event.type.startsWith("hermes.tool.")) {
      try {
        this.tool(event.type.slice("hermes.tool.".length), JSON.parse(event.data));
      } catch {
        // An event this page cannot read changes nothing it shows.
      }
    } else if (event.type.startsWith("hermes.approval.")) {
      try {
        this.approval(event.type.slice("hermes.approval.".length), JSON.parse(event.data));
      } catch {
        // As above.
      }
    } else if (event.type === "hermes.context.compacted") {
      try {
        this.compacted(JSON.parse(event.data));
      } catch {
        // As above.
      }
    }
  }

  compacted(data) {
    this.render();
    // What the model says next comes below the divider.
    this.segment = null;
    const sizes = `${shortTokens(data.tokens_before)} → ${shortTokens(data.tokens_after)} tokens`;
    const text =
      data.how === "truncation"
        ? `Oldest messages dropped to fit the model's context (${sizes})`
        : `Earlier conversation summarised (${sizes})`;
    const divider = element("div", "context-divider");
    divider.setAttribute("role", "separator");
    divider.append(element("span", "", text));
    this.body.append(divider);
    if (nearBottom()) scrollDown();
  }

  approval(kind, data) {
    if (kind === "request" && data.id && !this.approvals.has(data.id)) {
      this.render();
      this.segment = null;
      this.approvals.set(data.id, new ApprovalPrompt(data, this.body));
      this.node.dataset.state = "streaming";
      if (nearBottom()) scrollDown();
    } else if (kind === "resolved") {
      const prompt = this.approvals.get(data.id);
      if (prompt) prompt.ended(data.outcome, data.by, data.reason);
    }
  }

  /** The stream is over: a question still open can no longer be answered. */
  closeApprovals(why) {
    for (const prompt of this.approvals.values()) prompt.ended("cancelled", null, why);
  }

  message(data) {
    if (data === "[DONE]") {
      this.sawDone = true;
      return;
    }
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      return;
    }
    if (chunk.error) {
      this.error = chunk.error.message || "the server reported an error";
      return;
    }
    const choice = chunk.choices && chunk.choices[0];
    if (!choice) return;
    const content = choice.delta && choice.delta.content;
    if (content) this.append(content);
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
  }

  append(text) {
    if (!this.segment) {
      const node = element("div", "markdown");
      this.body.append(node);
      this.segment = { node, text: "" };
    }
    this.segment.text += text;
    this.dirty.add(this.segment);
    this.node.dataset.state = "streaming";
    this.schedule();
  }

  tool(kind, data) {
    if (kind === "started") {
      // Text after the tool is a new piece of the answer, below it.
      this.segment = null;
      const row = element("div", "tool running");
      row.append(element("span", "tool-icon", "⚙"), element("span", "tool-name", data.tool || "tool"));
      if (data.preview) row.append(element("code", "tool-preview", data.preview));
      const status = element("span", "tool-status", "running…");
      row.append(status);
      this.body.append(row);
      this.tools.set(data.call_id || `${data.tool}:${data.index}`, { row, status, name: data.tool });
      this.node.dataset.state = "streaming";
    } else if (kind === "running") {
      for (const entry of this.tools.values()) {
        if (entry.name === data.tool && entry.row.classList.contains("running")) {
          entry.status.textContent = `running for ${seconds(data.duration || 0)}…`;
        }
      }
    } else if (kind === "finished") {
      const entry = this.tools.get(data.call_id || `${data.tool}:${data.index}`);
      if (!entry) return;
      entry.row.classList.remove("running");
      entry.row.classList.add(data.ok ? "ok" : "failed");
      const took = typeof data.duration === "number" ? ` in ${seconds(data.duration)}` : "";
      entry.status.textContent = data.ok ? `done${took}` : `failed${took}`;
    }
    if (nearBottom()) scrollDown();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  render() {
    if (this.frame) {
      cancelAnimationFrame(this.frame);
      this.frame = 0;
    }
    const stick = nearBottom();
    for (const segment of this.dirty) {
      segment.node.replaceChildren(renderMarkdown(segment.text));
      addCopyButtons(segment.node);
    }
    this.dirty.clear();
    if (stick) scrollDown();
  }

  note(text, className) {
    this.render();
    const stick = nearBottom();
    const note = element("p", `note ${className}`, text);
    if (className === "error") note.setAttribute("role", "alert");
    this.node.append(note);
    if (stick) scrollDown();
  }

  finished() {
    this.closeApprovals("the answer ended");
    if (this.error) return this.fail(this.error);
    this.render();
    this.node.dataset.state = "done";
    if (this.finishReason === "length") {
      this.note("The answer stopped at the model's length limit.", "warning");
    } else if (!this.sawDone) {
      this.note("The answer ended before the server said it was complete.", "warning");
    }
  }

  stopped() {
    this.closeApprovals("stopped");
    this.node.dataset.state = "stopped";
    this.note("Stopped.", "stopped");
  }

  fail(message) {
    this.closeApprovals("the answer failed");
    this.node.dataset.state = "error";
    this.note(message, "error");
  }
}

const OUTCOMES = {
  approved: "Approved",
  denied: "Denied",
  expired: "Expired: nobody answered in time",
  cancelled: "Cancelled",
};

/** A command that waits for the user's yes: what it is, why it needs one,
 * and Approve / Deny; afterwards how it ended. Everything the server sent
 * is shown as text. */
class ApprovalPrompt {
  constructor(data, parent) {
    this.id = data.id;
    this.done = false;
    this.node = element("div", "approval waiting");
    this.node.dataset.approvalId = data.id;
    this.node.setAttribute("role", "group");
    this.node.setAttribute("aria-label", "Approval needed");
    const head = element("div", "approval-head");
    this.title = element("span", "approval-title", "Approval needed");
    head.append(
      this.title,
      element("span", "tool-name", data.tool || "tool"),
    );
    this.node.append(head);
    if (data.reason) this.node.append(element("p", "approval-reason", data.reason));
    const pre = element("pre", "approval-command");
    pre.append(element("code", "", data.command || JSON.stringify(data.arguments || {})));
    this.node.append(pre);
    this.buttons = element("div", "approval-buttons");
    this.approve = element("button", "approve", "Approve");
    this.deny = element("button", "deny", "Deny");
    for (const button of [this.approve, this.deny]) button.type = "button";
    this.approve.addEventListener("click", () => this.answer(true));
    this.deny.addEventListener("click", () => this.answer(false));
    this.buttons.append(this.approve, this.deny);
    if (typeof data.expires_at === "number") {
      const until = new Date(data.expires_at * 1000).toLocaleTimeString();
      this.buttons.append(element("span", "approval-deadline", `waits until ${until}`));
    }
    this.node.append(this.buttons);
    this.status = element("p", "approval-status");
    this.status.setAttribute("role", "status");
    this.status.hidden = true;
    this.node.append(this.status);
    parent.append(this.node);
  }

  async answer(approve) {
    if (this.done) return;
    this.approve.disabled = this.deny.disabled = true;
    this.show(approve ? "Approving…" : "Denying…");
    try {
      const response = await apiFetch(`/v1/approvals/${encodeURIComponent(this.id)}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ approve }),
      });
      if (!response.ok) {
        this.show(await errorMessage(response), "error");
        return;
      }
      const body = await response.json();
      this.ended(body.outcome, body.by, body.reason);
    } catch (error) {
      if (this.done) return;
      this.approve.disabled = this.deny.disabled = false;
      this.show(`The answer did not reach the server: ${error.message}`, "error");
    }
  }

  show(text, className) {
    this.status.hidden = false;
    this.status.className = `approval-status${className ? " " + className : ""}`;
    this.status.textContent = text;
  }

  ended(outcome, by, reason) {
    if (this.done) return;
    this.done = true;
    this.buttons.remove();
    this.title.textContent = "Approval";
    this.node.classList.remove("waiting");
    this.node.classList.add(outcome === "approved" ? "approved" : "refused");
    this.node.dataset.outcome = outcome;
    let text = OUTCOMES[outcome] || outcome;
    if (by) text += ` by ${by}`;
    if (reason && outcome !== "approved") text += ` (${reason})`;
    this.show(text);
  }
}

function addCopyButtons(root) {
  if (!navigator.clipboard) return;
  for (const pre of root.querySelectorAll("pre")) {
    const button = element("button", "copy", "Copy");
    button.type = "button";
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(pre.querySelector("code").textContent);
        button.textContent = "Copied";
      } catch {
        button.textContent = "Not copied";
      }
      setTimeout(() => (button.textContent = "Copy"), 1500);
    });
    pre.append(button);
  }
}

// ---- asking ----

function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
  document.body.classList.toggle("busy", busy);
}

async function ask(question) {
  const exchange = new Exchange(question);
  const controller = new AbortController();
  state.running = { controller, exchange };
  setBusy(true);
  const body = { messages: [{ role: "user", content: question }], stream: true };
  if (state.model) body.model = state.model;
  try {
    const response = await apiFetch("/v1/chat/completions", {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "X-Session-ID": state.sessionId,
        "X-Hermes-Stream-Extensions": "tools,approvals,context",
      },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) {
      exchange.fail(await errorMessage(response));
      return;
    }
    await readEvents(response.body, (event) => exchange.handle(event));
    exchange.finished();
  } catch (error) {
    if (controller.signal.aborted) exchange.stopped();
    else if (error instanceof KeyMissing) exchange.fail(`An API key is needed: ${error.message}`);
    else exchange.fail(`The connection to the server failed: ${error.message}`);
  } finally {
    if (state.running && state.running.controller === controller) {
      state.running = null;
      setBusy(false);
    }
  }
}

function stop() {
  if (state.running) state.running.controller.abort();
}

function newChat() {
  stop();
  state.sessionId = newSessionId();
  ui.messages.replaceChildren();
  ui.empty.hidden = false;
  ui.prompt.focus();
}

function fitPrompt() {
  ui.prompt.style.height = "auto";
  ui.prompt.style.height = `${Math.min(ui.prompt.scrollHeight, 240)}px`;
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  const question = ui.prompt.value.trim();
  if (!question || state.running) return;
  ui.prompt.value = "";
  fitPrompt();
  ask(question);
});
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  } else if (event.key === "Escape" && state.running) {
    stop();
  }
});
ui.prompt.addEventListener("input", fitPrompt);
ui.stop.addEventListener("click", stop);
ui.newChat.addEventListener("click", newChat);

document.documentElement.dataset.ready = "true";
ui.prompt.focus();
loadModel();
