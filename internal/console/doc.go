// Package console is hale's web console, served by hale server at /console (docs/console.md).
//
// Pages are plain HTML, CSS and JavaScript embedded in the binary (assets/): no build step. The
// page polls small JSON endpoints under /console/api for live updates.
//
// Security model:
//   - Sign-in is with an access key (store.AccessKey): either a one-time token that `hale
//     console` gets for the key it signs with (SigV4, POST TokenPath), good once and for
//     TokenLifetime, or the key's id and secret typed into the sign-in form.
//   - A session is a random id in an HttpOnly, SameSite=Strict cookie (Secure over TLS), kept
//     in the server's memory with an expiry; it names the access key, which is read from the
//     store on every request, so a deleted key signs its sessions out.
//   - Every POST must come from the console's own origin (Origin, or Referer when a browser
//     sends no Origin) and, once signed in, carry the session's CSRF token (X-CSRF-Token).
//     The sign-in form is protected by a double-submitted cookie token instead.
//   - Reads and actions are authorised exactly as the API authorises them: auth.Allows with
//     the operation's action name (sagemaker:UpdateCluster, ...) and auth.AllowsCluster with
//     the cluster's name; actions run the API operation itself (api.DecodeInput, then
//     Operation.Invoke on the same service), so validation messages are the API's, and each
//     accepted action adds a cluster event naming the console and the key's principal.
package console
