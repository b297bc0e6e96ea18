// hale console: a single page over /console/api. Plain JavaScript, no build step. Each view
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

// ---- views ----

function viewClusters(view) {
  crumbs();
  const body = h("tbody", { id: "clusters" });
  view.replaceChildren(
    h("h1", {}, "Clusters", h("span", { class: "spacer" }), h("a", { href: "#/create", class: "button", id: "create-link" }, "Create cluster")),
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Status"), h("th", {}, "Instance groups"),
        h("th", { class: "opt" }, "Orchestrator"), h("th", { class: "opt" }, "Created"))),
      body)));
  poll(async () => {
    const cs = await getJSON("/clusters");
    if (!cs.length) {
      body.replaceChildren(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No clusters yet. Create one with hale up, the API, or Create cluster.")));
      return;
    }
    body.replaceChildren(...cs.map((c) => h("tr", { "data-cluster": c.Name },
      h("td", {}, h("a", { href: "#/c/" + enc(c.Name) }, c.Name)),
      h("td", { class: "status" }, badge(c.Status), c.FailureMessage ? h("div", { class: "muted" }, c.FailureMessage) : null),
      h("td", {}, groupChips(c.Groups)),
      h("td", { class: "opt" }, c.Orchestrator),
      h("td", { class: "opt", title: stamp(c.CreatedAt) }, ago(c.CreatedAt)))));
  });
}

function clusterTabs(name, on) {
  const base = "#/c/" + enc(name);
  const tab = (label, href, key) => h("a", { href, class: on === key ? "on" : "", id: "tab-" + key }, label);
  return h("nav", { class: "tabs" }, tab("Nodes", base, "nodes"), tab("Events", base + "/events", "events"),
    tab("Logs", base + "/logs", "logs"), tab("Repairs", base + "/repairs", "repairs"));
}

// liveHeader is a cluster page's header whose status badge follows the cluster (sub pages).
function liveHeader(name) {
  const box = h("div", {}, clusterHeader(name, ""));
  poll(async () => {
    // The list needs sagemaker:ListClusters; without it the badge stays blank, quietly.
    const cs = await getJSON("/clusters").catch(() => null);
    const c = cs && cs.find((x) => x.Name === name);
    if (cs) box.replaceChildren(clusterHeader(name, c ? c.Status : "Deleted"));
  }, 5000);
  return box;
}

function clusterHeader(name, status) {
  return h("h1", {}, name, h("span", { id: "cluster-status" }, badge(status)), h("span", { class: "spacer" }),
    h("button", { type: "button", class: "danger small", id: "delete-cluster", onclick: async () => {
      if (await confirmAction("Delete cluster " + name + "?", "DeleteCluster terminates every node of " + name + " and removes the cluster. This cannot be undone.", "Delete cluster")) {
        if (await act({ Action: "DeleteCluster", Cluster: name }, "Deleting " + name)) location.hash = "#/";
      }
    } }, "Delete cluster"));
}

function viewCluster(view, name) {
  crumbs([name]);
  const selected = new Set();
  const status = h("span", {}, "");
  const head = h("div", {}, clusterHeader(name, ""));
  const facts = h("div", { class: "card", id: "cluster-facts" }, "Loading…");
  const groupsBody = h("tbody", { id: "groups" });
  const nodesBody = h("tbody", { id: "nodes" });
  const selCount = h("span", { class: "muted", id: "selected-count" }, "");
  const nodeAction = (action, verb, warn) => async () => {
    const ids = [...selected];
    if (!ids.length) return;
    if (await confirmAction(verb + " " + ids.length + " node(s)?", warn + "\n" + ids.join(", "), verb)) {
      const inst = ids.filter((i) => i.startsWith("i-"));
      const logical = ids.filter((i) => !i.startsWith("i-"));
      if (await act({ Action: action, Cluster: name, NodeIds: inst.length ? inst : undefined, NodeLogicalIds: logical.length ? logical : undefined }, verb + " " + ids.join(", "))) {
        selected.clear();
      }
    }
  };
  view.replaceChildren(head, clusterTabs(name, "nodes"), facts,
    h("h2", {}, "Instance groups"),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Group"), h("th", { class: "opt" }, "Type"),
      h("th", {}, "Running / target"), h("th", { class: "opt" }, "Status"), h("th", {}, ""))), groupsBody)),
    h("h2", {}, "Nodes"),
    h("div", { class: "selbar" }, selCount,
      h("button", { type: "button", class: "small", id: "reboot-nodes", onclick: nodeAction("RebootNodes", "Reboot", "BatchRebootClusterNodes reboots the selected nodes; their jobs are interrupted.") }, "Reboot"),
      h("button", { type: "button", class: "small", id: "replace-nodes", onclick: nodeAction("ReplaceNodes", "Replace", "BatchReplaceClusterNodes replaces the selected nodes with new instances; their local disks are lost.") }, "Replace"),
      h("button", { type: "button", class: "small danger", id: "delete-nodes", onclick: nodeAction("DeleteNodes", "Delete", "BatchDeleteClusterNodes terminates the selected nodes and lowers their groups' counts.") }, "Delete")),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "Node"),
      h("th", {}, "Status"), h("th", {}, "Health"), h("th", { class: "opt" }, "Group"), h("th", { class: "opt" }, "Address"),
      h("th", { class: "opt" }, "Orchestrator"), h("th", { class: "opt" }, "Repair"))), nodesBody)));
  const updateSel = () => { selCount.textContent = selected.size ? selected.size + " selected" : "Select nodes to act on them:"; };
  updateSel();
  let last = "";
  poll(async () => {
    // Redraw only what changed since the last poll: a steady 1,000-node cluster costs the
    // browser one small comparison every 2 s instead of rebuilding its table.
    const text = await getText("/clusters/" + enc(name));
    if (text === last) return;
    last = text;
    const d = JSON.parse(text);
    head.replaceChildren(clusterHeader(name, d.Status));
    const rs = d.Repairs;
    facts.replaceChildren(...[h("dl", { class: "facts" },
      h("dt", {}, "ARN"), h("dd", { class: "mono" }, d.ARN),
      h("dt", {}, "Orchestrator"), h("dd", {}, d.Orchestrator),
      d.FailureMessage ? [h("dt", {}, "Failure"), h("dd", {}, d.FailureMessage)] : null,
      h("dt", {}, "Nodes"), h("dd", { id: "node-summary" }, d.NodesRefused ? "—" : summary(d.Nodes)),
      rs ? [h("dt", {}, "Repairs"), h("dd", { id: "repairs-status" }, rs.InRepair + " in repair (at most " + rs.MaxInRepair + " at once)" +
        (rs.Waiting && rs.Waiting.length ? "; waiting: " + rs.Waiting.join(", ") : ""))] : null,
      h("dt", {}, "Created"), h("dd", {}, stamp(d.CreatedAt))),
    rs && rs.Paused ? h("p", { class: "card pause" }, "Automatic repairs are paused since " + stamp(rs.Paused.Since) + ": " + rs.Paused.Fault +
      " on " + rs.Paused.Nodes.join(", ") + ". Resume with hale repairs resume --cluster-name " + name + ".") : null].filter(Boolean));
    groupsBody.replaceChildren(...d.Groups.map((g) => h("tr", { "data-group": g.Name },
      h("td", {}, g.Name), h("td", { class: "opt" }, g.InstanceType),
      h("td", { class: "num" }, (g.Counts.Running || 0) + " / " + g.Target),
      h("td", { class: "opt" }, badge(g.Status)),
      h("td", {}, g.Controller ? h("span", { class: "muted" }, "controller") : h("button", { type: "button", class: "small scale", "data-group": g.Name, onclick: async () => {
        const n = await confirmAction("Scale " + g.Name, "UpdateCluster sets instance group " + g.Name + " of " + name + " to this many instances (now " + g.Target + ").", "Scale", g.Target, true);
        if (n !== false) await act({ Action: "ScaleGroup", Cluster: name, Group: g.Name, Count: n }, "Scaling " + g.Name + " to " + n);
      } }, "Scale…")))));
    if (d.NodesRefused) {
      nodesBody.replaceChildren(h("tr", {}, h("td", { colspan: 8, class: "error" }, d.NodesRefused)));
      return;
    }
    nodesBody.replaceChildren(...d.Nodes.map((n) => {
      const id = n.InstanceID || n.LogicalID;
      return h("tr", { "data-node": id, "data-logical": n.LogicalID },
        h("td", {}, h("input", { type: "checkbox", "aria-label": "select " + id, checked: selected.has(id), onchange: (ev) => {
          if (ev.target.checked) selected.add(id); else selected.delete(id);
          updateSel();
        } })),
        h("td", {}, h("div", { class: "mono" }, id), h("div", { class: "muted" }, n.Hostname || n.LogicalID)),
        h("td", { class: "status" }, badge(n.Status), n.StatusMessage ? h("div", { class: "muted" }, n.StatusMessage) : null),
        h("td", { class: "health" }, badge(n.Health), n.GPUs ? h("div", { class: "muted" }, n.HealthyGPUs + "/" + n.GPUs + " GPUs healthy") : null,
          n.RepairStatus ? h("div", { class: "phone-only" }, n.RepairStatus) : null),
        h("td", { class: "opt" }, n.Group, h("div", { class: "muted" }, n.InstanceType)),
        h("td", { class: "opt mono" }, n.Address || ""),
        h("td", { class: "opt" }, n.OrchestratorStatus || ""),
        h("td", { class: "repair opt" }, n.RepairStatus || (n.DeepHealthCheck ? "Deep health check: " + n.DeepHealthCheck : "")));
    }));
    updateSel();
  });
}

function summary(nodes) {
  const by = {};
  for (const n of nodes) by[n.Health] = (by[n.Health] || 0) + 1;
  return nodes.length + " node(s): " + Object.entries(by).map(([k, v]) => v + " " + k).join(", ");
}

function viewEvents(view, name) {
  crumbs([name, "#/c/" + enc(name)], ["Events"]);
  const body = h("tbody", { id: "events" });
  const level = h("select", { id: "f-level" }, h("option", { value: "" }, "any"), ["Info", "Warn", "Error"].map((l) => h("option", { value: l }, l)));
  const type = h("select", { id: "f-type" }, h("option", { value: "" }, "any"), ["Cluster", "InstanceGroup", "Instance"].map((l) => h("option", { value: l }, l)));
  const group = h("input", { id: "f-group", placeholder: "group name", size: 12 });
  const inst = h("input", { id: "f-instance", placeholder: "i-…", size: 20 });
  const text = h("input", { id: "f-text", placeholder: "text", size: 16 });
  view.replaceChildren(liveHeader(name), clusterTabs(name, "events"),
    h("div", { class: "filters" }, h("label", {}, "Level", level), h("label", {}, "Resource", type), h("label", {}, "Group", group),
      h("label", {}, "Instance", inst), h("label", {}, "Contains", text)),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Time"), h("th", {}, "Level"),
      h("th", { class: "opt" }, "Resource"), h("th", {}, "Description"))), body)));
  poll(async () => {
    const q = new URLSearchParams({ level: level.value, type: type.value, group: group.value.trim(), instance: inst.value.trim(), q: text.value.trim() });
    const evs = await getJSON("/clusters/" + enc(name) + "/events?" + q);
    body.replaceChildren(...(evs.length ? evs.map((e) => h("tr", { "data-event": e.ID },
      h("td", { class: "mono", title: ago(e.Time) }, stamp(e.Time)), h("td", {}, badge(e.Level)),
      h("td", { class: "opt" }, e.ResourceType, e.Group ? h("div", { class: "muted" }, e.Group) : null, e.InstanceID ? h("div", { class: "muted mono" }, e.InstanceID) : null),
      h("td", {}, e.Description))) : [h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No events match."))]));
  });
}

function viewLogs(view, name) {
  crumbs([name, "#/c/" + enc(name)], ["Logs"]);
  const body = h("tbody", { id: "streams" });
  view.replaceChildren(liveHeader(name), clusterTabs(name, "logs"),
    h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Log stream"), h("th", {}, "Last event"))), body)));
  poll(async () => {
    const ans = await getJSON("/clusters/" + enc(name) + "/logs");
    const ss = ans.Streams || [];
    body.replaceChildren(...(ss.length ? ss.map((s) => h("tr", { "data-stream": s.Name },
      h("td", { class: "mono" }, h("a", { href: "#/c/" + enc(name) + "/logs/" + enc(s.Name) }, s.Name)),
      h("td", { title: stamp(s.LastEvent) }, ago(s.LastEvent)))) : [h("tr", {}, h("td", { colspan: 2, class: "muted" }, "No log streams yet."))]));
  }, 5000);
}

function viewLogStream(view, name, stream) {
  crumbs([name, "#/c/" + enc(name)], ["Logs", "#/c/" + enc(name) + "/logs"], [stream]);
  const pre = h("pre", { class: "log", id: "log" });
  const follow = h("input", { type: "checkbox", id: "follow", checked: true });
  const count = h("span", { class: "muted", id: "line-count" }, "");
  view.replaceChildren(liveHeader(name), clusterTabs(name, "logs"),
    h("div", { class: "row" }, h("h2", { class: "mono" }, stream), h("span", { class: "spacer" }),
      h("label", { class: "row" }, follow, "Follow live"), count),
    pre);
  let after = 0, lines = 0;
  poll(async () => {
    if (!follow.checked && after > 0) return;
    for (;;) {
      const ans = await getJSON("/clusters/" + enc(name) + "/logs?" + new URLSearchParams({ stream, after }));
      const ls = ans.Lines || [];
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      for (const l of ls) pre.append(h("span", { class: "t" }, stamp(l.Time) + " "), l.Message + "\n");
      lines += ls.length;
      after = ans.NextSeq;
      count.textContent = lines + " line(s)";
      if (ls.length && follow.checked && atEnd) pre.scrollTop = pre.scrollHeight;
      if (ls.length < 1000) break;
    }
  }, 1000);
}

function viewRepairs(view, name, id) {
  crumbs([name, "#/c/" + enc(name)], ["Repairs", id ? "#/c/" + enc(name) + "/repairs" : null], ...(id ? [[id]] : []));
  const box = h("div", { id: id ? "repair" : "repairs" });
  view.replaceChildren(liveHeader(name), clusterTabs(name, "repairs"), box);
  poll(async () => {
    const rs = await getJSON("/clusters/" + enc(name) + "/repairs");
    if (id) {
      const r = rs.find((x) => x.ID === id);
      box.replaceChildren(r ? repairDetail(r) : h("p", { class: "muted" }, "No repair " + id + " in the last 30 days."));
      return;
    }
    box.replaceChildren(h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Started"), h("th", {}, "Node"), h("th", {}, "Fault"), h("th", {}, "Action"), h("th", {}, "State"), h("th", { class: "opt" }, "Last step"))),
      h("tbody", {}, rs.length ? rs.map((r) => h("tr", { "data-repair": r.ID },
        h("td", {}, h("a", { href: "#/c/" + enc(name) + "/repairs/" + enc(r.ID) }, stamp(r.CreatedAt))),
        h("td", { class: "mono" }, r.LogicalID, h("div", { class: "muted" }, r.InstanceID)),
        h("td", {}, r.Fault), h("td", {}, r.Action), h("td", {}, badge(r.State)),
        h("td", { class: "opt" }, r.Timeline && r.Timeline.length ? r.Timeline[r.Timeline.length - 1].What : ""))) :
        [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No repairs in the last 30 days."))]))));
  });
}

function repairDetail(r) {
  const steps = r.Timeline || [];
  const t0 = steps.length ? new Date(steps[0].At).getTime() : 0;
  return h("div", {},
    h("div", { class: "card" }, h("dl", { class: "facts" },
      h("dt", {}, "Node"), h("dd", { class: "mono" }, r.LogicalID + " (" + r.InstanceID + (r.NewInstanceID ? " → " + r.NewInstanceID : "") + ")"),
      h("dt", {}, "Fault"), h("dd", {}, r.Fault),
      h("dt", {}, "Action"), h("dd", {}, r.Action + " (from " + r.Source + ")"),
      h("dt", {}, "State"), h("dd", { id: "repair-state" }, badge(r.State)),
      h("dt", {}, "Reason"), h("dd", {}, r.Reason),
      r.Message ? [h("dt", {}, "Message"), h("dd", {}, r.Message)] : null)),
    h("h2", {}, "Timeline"),
    h("ol", { class: "timeline", id: "timeline" }, steps.map((s) => h("li", {},
      h("div", { class: "when" }, stamp(s.At), h("span", { class: "delta" }, "+" + ((new Date(s.At).getTime() - t0) / 1000).toFixed(1) + "s")),
      h("div", {}, s.What)))));
}

function viewCreate(view) {
  crumbs(["Create cluster"]);
  const doc = h("textarea", { id: "create-doc", spellcheck: "false", placeholder: '{\n  "ClusterName": "demo",\n  "InstanceGroups": [ ... ]\n}' });
  const file = h("input", { type: "file", id: "create-file", accept: ".json,application/json", onchange: async () => {
    if (file.files[0]) doc.value = await file.files[0].text();
  } });
  const result = h("div", { id: "create-result" });
  view.replaceChildren(h("h1", {}, "Create cluster"),
    h("p", { class: "muted" }, "Paste a CreateCluster request (the JSON the API and aws sagemaker create-cluster --cli-input-json take), or upload one. It is checked exactly as the API checks it."),
    h("div", { class: "card" }, h("label", {}, "CreateCluster document", doc),
      h("div", { class: "row" }, h("label", {}, "or upload a file", file), h("span", { class: "spacer" }),
        h("button", { type: "button", class: "primary", id: "create-submit", onclick: async () => {
          result.replaceChildren();
          let name = "";
          try { name = JSON.parse(doc.value).ClusterName || ""; } catch (e) { /* the API's SerializationException says why */ }
          if (!(await confirmAction("Create cluster " + name + "?", "CreateCluster launches the document's instances.", "Create", undefined, true))) return;
          try {
            const ans = await post(API + "/actions", { Action: "CreateCluster", Document: doc.value });
            clearFlash();
            location.hash = "#/c/" + enc(name || (ans.Output.ClusterArn || "").split("/").pop());
          } catch (e) {
            result.replaceChildren(h("p", { class: "error", id: "create-error" }, h("span", { class: "code" }, e.Code || "Error"), e.Message || String(e)));
          }
        } }, "Create"))),
    result);
}

// ---- routing ----

function route() {
  routeSeq++;
  timers.forEach(clearTimeout);
  timers = [];
  clearFlash();
  const view = document.getElementById("view");
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "create") return viewCreate(view);
  if (parts[0] === "c" && parts[1]) {
    const name = parts[1];
    switch (parts[2]) {
      case "events": return viewEvents(view, name);
      case "logs": return parts.length > 3 ? viewLogStream(view, name, parts.slice(3).join("/")) : viewLogs(view, name);
      case "repairs": return viewRepairs(view, name, parts[3]);
      default: return viewCluster(view, name);
    }
  }
  return viewClusters(view);
}

window.addEventListener("hashchange", route);
document.getElementById("signout").addEventListener("click", async () => {
  await post("/console/signout", {}).catch(() => {});
  location.href = "/console/signin";
});
route();
