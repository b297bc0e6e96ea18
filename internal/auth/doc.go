// Package auth authenticates and authorizes hale's API callers the way AWS does: requests are
// signed with Signature Version 4 (SigV4) by an unmodified AWS SDK or the AWS CLI, Verifier
// checks the signature against a stored access key, and Allows / AllowsCluster decide what the
// key's principal may do with IAM-style action and resource patterns.
//
// Signatures are recomputed with the AWS SDK for Go v2's own signer
// (github.com/aws/aws-sdk-go-v2/aws/signer/v4) rather than a second implementation of the
// algorithm, so hale and the SDK cannot disagree about canonicalization.
//
// Errors are *api.Error values with the codes of AWS's common errors
// (MissingAuthenticationToken, IncompleteSignature, InvalidSignatureException,
// UnrecognizedClientException, AccessDeniedException), so SDKs surface them as they would
// surface AWS's own.
package auth
