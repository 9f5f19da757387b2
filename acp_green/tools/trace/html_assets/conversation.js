// acp-green trace html: the conversation view, one section per session, drawn from data.conversation.
// The trace is untrusted: its text reaches the page only through textContent and attributes.
const acpConversation = (function () {
  "use strict";
  const ROLES = {
    prompt: "prompt", reply: "agent", thought: "thought", user: "user message", tool: "tool call",
    permission: "permission", plan: "plan", cancel: "cancel", end: "", request: "", info: "", notice: "",
    error: "error", log: "stderr",
  };
  const PLAN_MARKS = { completed: "☑", in_progress: "◐", pending: "☐" };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Each entry's first line: who speaks, and a link to its place on the timeline.
  function heading(entry, ui) {
    const row = el("div", "who");
    row.appendChild(el("span", "role", ROLES[entry.k] || entry.k));
    return withTime(row, entry, ui);
  }

  function withTime(row, entry, ui) {
    const ev = ui.events[entry.ev[0]];
    const link = el("a", "at", ui.seconds(ev.ts));
    link.href = "#seq=" + ev.seq;
    link.dataset.seq = String(ev.seq);
    link.title = "show it on the timeline";
    row.appendChild(link);
    return row;
  }

  function line(entry, ui, className, text) {
    return withTime(el("div", "line " + className, text), entry, ui);
  }

  function answered(entry, ui) {
    if (entry.outcome === "open") return "no answer";
    return entry.answer + (typeof entry.took === "number" ? " · " + ui.duration(entry.took) : "");
  }

  function tool(entry, node) {
    const title = el("div", "title", entry.title || "(untitled)");
    if (entry.kind) title.prepend(el("span", "tool-kind", entry.kind));
    node.appendChild(title);
    const trail = el("div", "statuses");
    entry.statuses.forEach((status, i) => {
      if (i) trail.append(" → ");
      trail.appendChild(el("span", "status status-" + status.replace(/[^a-z_]/g, ""), status));
    });
    node.appendChild(trail);
    if (entry.locations.length) node.appendChild(el("div", "where", entry.locations.join("  ")));
    if (entry.content) node.appendChild(el("pre", "tool-content", entry.content));
  }

  function permission(entry, node) {
    node.appendChild(el("div", "title", "asked to allow: " + entry.title));
    node.appendChild(el("div", "options", "options: " + entry.options.map((o) => o[1] || o[0]).join(" · ")));
    const outcome = entry.outcome === "open" ? "no answer" : entry.outcome === "ok" ? "chose: " + entry.answer : entry.answer;
    node.appendChild(el("div", "answer outcome-" + entry.outcome, outcome));
  }

  function plan(entry, node) {
    const list = el("ol", "plan-items");
    entry.items.forEach(([status, content, priority]) => {
      const item = el("li", "plan-" + status.replace(/[^a-z_]/g, ""), (PLAN_MARKS[status] || "·") + " " + content);
      if (priority) item.title = "priority " + priority;
      list.appendChild(item);
    });
    node.appendChild(list);
    if (entry.revisions > 1) node.appendChild(el("div", "muted", "the latest of " + entry.revisions + " versions"));
  }

  function entryNode(entry, ui) {
    const node = el("div", "entry " + entry.k);
    if (entry.k === "end") {
      node.classList.add("outcome-" + entry.outcome);
      return withEnd(node, entry, ui);
    }
    if (entry.k === "request") {
      node.classList.add("outcome-" + entry.outcome);
      node.appendChild(line(entry, ui, "", (entry.side === "agent" ? "agent asked " : "") + entry.method +
        (entry.what ? " " + entry.what : "") + " ⇒ " + answered(entry, ui)));
      return node;
    }
    if (entry.k === "info" || entry.k === "notice") {
      const what = entry.k === "info" ? entry.what + (entry.text ? ": " + entry.text : "") : entry.text;
      node.appendChild(line(entry, ui, "", what + (entry.count > 1 ? " (×" + entry.count + ")" : "")));
      return node;
    }
    if (entry.k === "cancel") {
      node.appendChild(line(entry, ui, "", "the client cancelled the turn (session/cancel)"));
      return node;
    }
    node.appendChild(heading(entry, ui));
    if (entry.k === "tool") tool(entry, node);
    else if (entry.k === "permission") permission(entry, node);
    else if (entry.k === "plan") plan(entry, node);
    else if (entry.k === "error") {
      node.appendChild(el("div", "title", entry.title));
      node.appendChild(el("pre", "text", entry.text));
    } else if (entry.k === "log") {
      if (entry.warn) node.classList.add("warn");
      node.querySelector(".role").textContent = entry.who === "agent" ? "stderr" : entry.who;
      node.appendChild(el("pre", "text", entry.text));
    } else node.appendChild(el("div", "text", entry.text));
    return node;
  }

  function withEnd(node, entry, ui) {
    const text = entry.outcome === "open" ? "the prompt was never answered (" + ui.duration(entry.took) + " until the trace ends)"
      : (entry.outcome === "error" ? "the prompt failed: " : "turn ended: ") + entry.answer + " · " + ui.duration(entry.took);
    node.appendChild(line(entry, ui, "", text));
    return node;
  }

  // Draws every section into `root`; returns the entry node of each event's seq (to follow a selection).
  function draw(root, data, ui) {
    const ofSeq = new Map();
    const toc = el("nav", "sessions");
    root.appendChild(toc);
    data.conversation.forEach((section, index) => {
      if (!section.entries.length) return;
      const lane = data.lanes[index];
      const box = el("section", lane.session === null ? "talk talk-connection" : "talk talk-session");
      box.id = "talk-" + index;
      box.dataset.lane = String(index);
      if (lane.session !== null) box.dataset.session = lane.session;
      const head = el("h2", "", lane.session === null ? "connection (no session)" : "session " + lane.session);
      if (section.title) head.appendChild(el("span", "session-title", section.title));
      if (section.cwd) head.appendChild(el("span", "cwd", section.cwd));
      box.appendChild(head);
      const link = el("a", "", lane.session === null ? "connection" : lane.session);
      link.href = "#talk-" + index;
      link.dataset.lane = String(index);
      toc.appendChild(link);
      const part = document.createDocumentFragment();
      section.entries.forEach((entry) => {
        const node = entryNode(entry, ui);
        entry.ev.forEach((ev) => ofSeq.set(String(ui.events[ev].seq), node));
        part.appendChild(node);
      });
      box.appendChild(part);
      root.appendChild(box);
    });
    if (toc.children.length < 2) toc.remove();
    else toc.prepend(el("span", "muted", "sessions:"));
    return ofSeq;
  }

  return { draw };
})();
