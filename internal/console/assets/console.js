// hale console: a single page over /console/api. Plain JavaScript, no build step: this file's
// helpers, then clusters.js, tabs.js and create.js (the views) and route.js. Each view
// renders once and then polls its JSON endpoint (live updates without reloads); elements are
// built with h() from text, never from HTML strings, so no stored value can inject markup.
"use strict";

const CSRF = document.querySelector('meta[name="csrf"]').content;
const API = "/console/api";
const POLL_MS = 2000;
let timers = [];
let routeSeq = 0;

// h builds an element: h("td", {class: "x"}, "text", child, ...).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

function enc(s) { return encodeURIComponent(s); }

async function getText(path) {
  const r = await fetch(API + path, { credentials: "same-origin" });
  if (r.status === 401) { location.href = "/console/signin"; throw new Error("signed out"); }
  const text = await r.text();
  if (!r.ok) throw JSON.parse(text);
  return text;
}
async function getJSON(path) { return JSON.parse(await getText(path)); }

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": CSRF },
    body: JSON.stringify(body),
  });
  if (r.status === 401) { location.href = "/console/signin"; throw new Error("signed out"); }
  const ans = await r.json().catch(() => ({}));
  if (!r.ok) throw ans;
  return ans;
}

function flash(kind, code, msg) {
  const box = document.getElementById("flash");
  box.replaceChildren(h("div", { class: "msg " + kind, id: kind === "error" ? "action-error" : "action-ok" },
    code ? h("span", { class: "code" }, code) : null, msg));
}
function clearFlash() { document.getElementById("flash").replaceChildren(); }
function showError(e) {
  flash("error", e && e.Code ? e.Code : "Error", e && e.Message ? e.Message : String(e && e.message || e));
}

function ago(t) {
  const d = (Date.now() - new Date(t).getTime()) / 1000;
  if (!isFinite(d)) return "";
  if (d < 60) return Math.max(0, Math.round(d)) + "s ago";
  if (d < 3600) return Math.round(d / 60) + "m ago";
  if (d < 86400) return Math.round(d / 3600) + "h ago";
  return Math.round(d / 86400) + "d ago";
}
function stamp(t) {
  const d = new Date(t);
  if (isNaN(d) || d.getFullYear() < 2000) return "";
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

const GOOD = ["InService", "Running", "Healthy", "Done", "Info"];
const BAD = ["Failed", "Failure", "Unhealthy", "Unreachable", "Error", "RollingBack", "Quarantined"];
function badge(text) {
  let cls = "badge warn";
  if (GOOD.includes(text)) cls = "badge ok";
  else if (BAD.includes(text)) cls = "badge bad";
  else if (!text || text === "Unknown") cls = "badge";
  return h("span", { class: cls }, text || "—");
}

function crumbs(...parts) {
  const nav = document.getElementById("crumbs");
  const out = [h("a", { href: "#/" }, "Clusters")];
  for (const [label, href] of parts) {
    out.push(h("span", { class: "sep" }, "›"));
    out.push(href ? h("a", { href }, label) : h("span", {}, label));
  }
  nav.replaceChildren(...out);
}

// poll runs fn now and every ms until the route changes.
function poll(fn, ms) {
  const seq = routeSeq;
  const tick = async () => {
    if (seq !== routeSeq) return;
    try { await fn(); } catch (e) { if (seq === routeSeq) showError(e); }
    if (seq === routeSeq) timers.push(setTimeout(tick, ms || POLL_MS));
  };
  tick();
}

// confirmAction opens the confirmation dialog; resolves to false (cancelled) or true, or the
// number typed when withCount is set.
function confirmAction(title, text, okLabel, withCount, safe) {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel || "Confirm";
  // Red for what destroys or interrupts; blue for scaling and creating.
  document.getElementById("confirm-ok").className = safe ? "primary" : "danger";
  const countLabel = document.getElementById("confirm-count-label");
  const count = document.getElementById("confirm-count");
  countLabel.hidden = withCount === undefined;
  if (withCount !== undefined) count.value = withCount;
  return new Promise((resolve) => {
    const done = (v) => { dlg.close(); form.removeEventListener("submit", ok); cancel.removeEventListener("click", no); resolve(v); };
    const form = document.getElementById("confirm-form");
    const cancel = document.getElementById("confirm-cancel");
    const ok = (ev) => { ev.preventDefault(); done(withCount === undefined ? true : Number(count.value)); };
    const no = () => done(false);
    form.addEventListener("submit", ok);
    cancel.addEventListener("click", no);
    dlg.addEventListener("cancel", no, { once: true });
    dlg.showModal();
    (withCount === undefined ? document.getElementById("confirm-ok") : count).focus();
  });
}

async function act(body, okText) {
  try {
    const ans = await post(API + "/actions", body);
    const out = ans.Output || {};
    const failed = (out.Failed || []).concat(out.FailedNodeLogicalIds || []);
    if (failed.length) {
      flash("error", failed[0].Code || "Failed", failed.map((f) => (f.NodeId || f.NodeLogicalId) + ": " + f.Message).join("; "));
    } else {
      flash("ok", "", okText + " (" + ans.Operation + " accepted)");
    }
    return ans;
  } catch (e) {
    showError(e);
    return null;
  }
}

function groupChips(groups) {
  return h("div", { class: "groups" }, groups.map((g) => {
    const running = g.Counts.Running || 0;
    const other = Object.entries(g.Counts).filter(([s]) => s !== "Running").map(([s, n]) => n + " " + s);
    return h("span", { class: "group-chip", "data-group": g.Name },
      g.Name + " ", h("b", {}, running + "/" + g.Target), " running", other.length ? " · " + other.join(", ") : "");
  }));
}
