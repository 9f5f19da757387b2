// acp-green trace html: draws the timeline, and the conversation beside it (conversation.js), from the
// page's JSON data block.
// The trace is untrusted: its text reaches the page only through textContent and attributes.
(function () {
  "use strict";
  const began = performance.now();
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const ROW = 16;
  const LABEL = 200;
  const head = document.getElementById("head");
  const main = document.getElementById("timeline");
  const canvas = document.getElementById("canvas");
  const detail = document.getElementById("detail");
  const talk = document.getElementById("conversation");
  const span = data.duration > 0 ? data.duration : 1;
  const markOfSeq = new Map();
  let zoom = 1;
  let selected = null;
  let entryOfSeq = new Map();
  let current = null;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function seconds(t) {
    const s = t - data.start;
    return span < 10 ? (s * 1000).toFixed(s * 1000 < 10 ? 2 : 1) + " ms" : s.toFixed(2) + " s";
  }

  function duration(d) {
    return d < 10 ? (d * 1000).toFixed(d * 1000 < 10 ? 2 : 1) + " ms" : d.toFixed(2) + " s";
  }

  function has(mk, cls) {
    return (" " + mk[3] + " ").includes(" " + cls + " ");
  }

  function pct(t) {
    return ((t - data.start) / span) * 100;
  }

  function drawHead() {
    const name = data.title || "trace";
    document.title = "ACP trace: " + name;
    head.appendChild(el("h1", "", name));
    const m = data.meta || {};
    const bits = [];
    if (Array.isArray(m.command)) bits.push("agent: " + m.command.join(" "));
    if (m.started) bits.push("started " + m.started);
    if (m.pid !== undefined && m.pid !== null) bits.push("pid " + m.pid);
    if ("exit" in m) bits.push(m.signal ? "ended by " + m.signal : "exit " + m.exit);
    else if (m.format) bits.push("no clean end recorded");
    head.appendChild(el("p", "meta", bits.join(" · ")));
    const count = (cls) => data.marks.filter((mk) => has(mk, cls)).length;
    head.appendChild(el("p", "summary", [
      data.events.length + " events", (data.lanes.length - 1) + " sessions", count("bar") + " requests",
      count("update") + " updates", count("cancel") + " cancels", count("cancelled") + " cancelled",
      count("error") + " errors", "over " + seconds(data.start + data.duration),
    ].join(" · ")));
    drawErrors();
    const tools = el("div", "tools");
    const views = el("span", "views");
    for (const [view, text] of [["both", "conversation + timeline"], ["conversation", "conversation"], ["timeline", "timeline"]]) {
      const button = el("button", "view-" + view, text);
      button.onclick = () => { document.body.dataset.view = view; setZoom(zoom); };
      views.append(button);
    }
    tools.append(views);
    const zoomIn = el("button", "zoom-in", "zoom +");
    const zoomOut = el("button", "zoom-out", "zoom −");
    const fit = el("button", "zoom-fit", "fit");
    zoomIn.onclick = () => setZoom(zoom * 2);
    zoomOut.onclick = () => setZoom(zoom / 2);
    fit.onclick = () => setZoom(1);
    tools.append(zoomIn, zoomOut, fit);
    const legend = el("span", "legend");
    for (const [color, text] of [["--client", "client request"], ["--agent", "agent request"], ["--update", "update"],
      ["--cancel", "cancel"], ["--error", "error"], ["--warn", "warning"]]) {
      const item = el("span", "", text);
      const swatch = el("i");
      swatch.style.background = "var(" + color + ")";
      item.prepend(swatch);
      legend.append(item);
    }
    tools.append(legend);
    head.appendChild(tools);
  }

  // Every error of the summary, each a link to its place (the same as clicking its mark).
  function drawErrors() {
    const errors = [];
    data.marks.forEach((mk, index) => { if (has(mk, "error")) errors.push(index); });
    if (!errors.length) return;
    const list = el("p", "errors");
    list.appendChild(el("span", "", "errors:"));
    errors.slice(0, 12).forEach((index) => {
      const mk = data.marks[index];
      const seq = data.events[mk[6][0]].seq;
      const lane = data.lanes[mk[0]];
      const link = el("a", "", mk[7].slice(0, 90) + (lane.session === null ? "" : " (" + lane.session.slice(0, 40) + ")"));
      link.href = "#seq=" + seq;
      link.dataset.seq = String(seq);
      list.appendChild(link);
    });
    if (errors.length > 12) list.appendChild(el("span", "", "and " + (errors.length - 12) + " more (red marks)"));
    head.appendChild(list);
  }

  function drawAxis() {
    const axis = el("div", "axis");
    axis.appendChild(el("div", "lane-label", "time"));
    const track = el("div", "track");
    const steps = 10;
    for (let i = 0; i < steps; i++) {
      const at = el("span", "at", seconds(data.start + (span * i) / steps));
      at.style.left = (100 * i) / steps + "%";
      track.appendChild(at);
    }
    axis.appendChild(track);
    canvas.appendChild(axis);
  }

  function drawLanes() {
    const tracks = [];
    const counts = data.lanes.map(() => ({ requests: 0, updates: 0, marked: 0 }));
    data.marks.forEach((mk) => {
      const c = counts[mk[0]];
      if (mk[2] === "bar") c.requests++;
      else if (mk[3].includes(" update")) c.updates++;
      if (/ (error|cancel|cancelled)\b/.test(mk[3])) c.marked++;
    });
    data.lanes.forEach((lane, index) => {
      const row = el("div", lane.session === null ? "lane lane-connection" : "lane lane-session");
      row.dataset.lane = String(index);
      if (lane.session !== null) row.dataset.session = lane.session;
      const label = el("div", "lane-label");
      label.appendChild(el("div", "name", lane.session === null ? "connection (no session)" : lane.session));
      if (lane.session !== null) label.title = lane.session;
      label.onclick = () => {
        const section = document.getElementById("talk-" + index);
        if (section) section.scrollIntoView({ block: "start" });
      };
      const c = counts[index];
      label.appendChild(el("div", "counts", c.requests + " requests · " + c.updates + " updates" +
        (c.marked ? " · " + c.marked + " errors/cancels" : "")));
      const track = el("div", "track");
      track.style.height = (lane.rows + 1) * ROW + "px";
      row.append(label, track);
      tracks.push(track);
      canvas.appendChild(row);
    });
    const parts = tracks.map(() => document.createDocumentFragment());
    data.marks.forEach((mk, index) => {
      const node = el("div", mk[3]);
      node.dataset.mark = String(index);
      node.dataset.seq = String(data.events[mk[6][0]].seq);
      node.tabIndex = 0;
      node.setAttribute("role", "button");
      node.title = mk[7] + (mk[2] === "bar" ? " · " + (mk[6].length > 1 ? seconds(data.start + mk[5] - mk[4]) : "no answer") : "");
      node.style.left = pct(mk[4]) + "%";
      node.style.top = mk[1] * ROW + 2 + "px";
      if (mk[2] === "bar") node.style.width = pct(data.start + mk[5] - mk[4]) + "%";
      mk[6].forEach((ev) => markOfSeq.set(String(data.events[ev].seq), index));
      parts[mk[0]].appendChild(node);
    });
    tracks.forEach((track, index) => track.appendChild(parts[index]));
  }

  function setZoom(value) {
    zoom = Math.min(Math.max(value, 1), 4096);
    const width = Math.max(main.clientWidth - LABEL, 100) * zoom;
    canvas.style.width = LABEL + width + "px";
  }

  function pretty(ev) {
    if (typeof ev.raw === "string") {
      try {
        return JSON.stringify(JSON.parse(ev.raw), null, 2);
      } catch (e) {
        return ev.raw;
      }
    }
    if (typeof ev.raw_b64 === "string") return "(bytes that are not UTF-8, base64)\n" + ev.raw_b64;
    return JSON.stringify(ev, null, 2);
  }

  function describe(ev) {
    const way = ev.from ? ev.from + " → " + ev.to : ev.component || "";
    const what = ev.type === "response" ? (ev.is_error ? "error answer" : "answer") + " to id " + JSON.stringify(ev.id)
      : ev.type === "request" ? "request " + (ev.method || "") + " id " + JSON.stringify(ev.id)
        : ev.type === "notification" ? "notification " + (ev.method || "")
          : ev.type === "line" ? "unreadable line: " + (ev.error || "")
            : (ev.type || "event") + (ev.level ? " (" + ev.level + ")" : "");
    return "seq " + ev.seq + " · " + seconds(ev.ts) + " · " + way + " · " + what;
  }

  function select(index, seq) {
    const mk = data.marks[index];
    if (!mk) return;
    if (selected) selected.classList.remove("selected");
    selected = canvas.querySelector('[data-mark="' + index + '"]');
    if (selected) selected.classList.add("selected");
    follow(seq || String(data.events[mk[6][0]].seq));  // the entry of the event asked for, else of the mark's first
    detail.replaceChildren();
    detail.hidden = false;
    const close = el("button", "close", "close");
    close.onclick = () => { detail.hidden = true; if (selected) selected.classList.remove("selected"); selected = null; };
    detail.appendChild(close);
    let heading = mk[7];
    if (mk[2] === "bar") heading += mk[6].length > 1 ? " · answered after " + seconds(data.start + mk[5] - mk[4]) : " · never answered";
    const lane = data.lanes[mk[0]];
    heading += " · " + (lane.session === null ? "no session" : "session " + lane.session);
    detail.appendChild(el("h2", "", heading));
    detail.dataset.mark = String(index);
    detail.dataset.seq = String(data.events[mk[6][0]].seq);
    mk[6].forEach((evIndex) => {
      const ev = data.events[evIndex];
      detail.appendChild(el("h3", "", describe(ev)));
      const pre = el("pre", "message", pretty(ev));
      pre.dataset.seq = String(ev.seq);
      detail.appendChild(pre);
      if (ev.type === "trace" && typeof ev.message === "string") pre.textContent = ev.message;
      if (typeof ev.raw === "string") {
        const raw = el("details");
        raw.appendChild(el("summary", "", "the line as it passed"));
        raw.appendChild(el("pre", "raw", ev.raw));
        detail.appendChild(raw);
      }
    });
    try {
      history.replaceState(null, "", "#seq=" + detail.dataset.seq);
    } catch (e) { /* a page opened from some places cannot change its address */ }
  }

  // The conversation's entry of an event, marked and scrolled into view.
  function follow(seq) {
    if (current) current.classList.remove("current");
    current = entryOfSeq.get(seq) || null;
    if (current) {
      current.classList.add("current");
      current.scrollIntoView({ block: "nearest" });
    }
  }

  function goTo(seq) {
    if (!markOfSeq.has(seq)) return;
    const index = markOfSeq.get(seq);
    select(index, seq);
    const node = canvas.querySelector('[data-mark="' + index + '"]');
    if (node) node.scrollIntoView({ block: "nearest", inline: "center" });
  }

  function fromHash() {
    const match = /^#seq=(\d+)$/.exec(location.hash);
    if (match) goTo(match[1]);
  }

  // A link to a place on the timeline (in the conversation, or an error of the summary) selects its mark.
  function onSeqLink(event) {
    const link = event.target.closest("a[data-seq]");
    if (!link) return;
    event.preventDefault();
    goTo(link.dataset.seq);
  }

  canvas.addEventListener("click", (event) => {
    const node = event.target.closest(".mark");
    if (node) select(Number(node.dataset.mark));
  });
  canvas.addEventListener("keydown", (event) => {
    const node = event.target.closest(".mark");
    if (node && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      select(Number(node.dataset.mark));
    }
  });
  talk.addEventListener("click", onSeqLink);
  head.addEventListener("click", onSeqLink);
  window.addEventListener("hashchange", fromHash);
  window.addEventListener("resize", () => setZoom(zoom));

  drawHead();
  drawAxis();
  drawLanes();
  entryOfSeq = acpConversation.draw(talk, data, { events: data.events, seconds, duration });
  setZoom(1);
  fromHash();
  void canvas.offsetHeight;  // lay out now, so the figure below includes it
  document.body.dataset.renderMs = String(Math.round(performance.now() - began));
  document.body.dataset.rendered = "true";
})();
