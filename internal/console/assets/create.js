// hale console: the create-cluster form (console.js has the helpers).
"use strict";

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
