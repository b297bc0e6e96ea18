// hale console: the clusters list and a cluster's nodes tab (console.js has the helpers).
"use strict";

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
        // The logical id first: the CLI, hale debug inject-fault, events and repairs name nodes by it.
        h("td", { class: "node" }, h("div", { class: "logical" }, n.LogicalID),
          n.InstanceID ? h("div", { class: "mono muted" }, n.InstanceID) : null,
          n.Hostname && n.Hostname !== n.LogicalID ? h("div", { class: "muted" }, n.Hostname) : null),
        h("td", { class: "status" }, badge(n.Status), n.StatusMessage ? h("div", { class: "muted" }, n.StatusMessage) : null),
        h("td", { class: "health" }, badge(n.Health), n.HealthNote ? h("div", { class: "muted note" }, n.HealthNote) : null,
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
