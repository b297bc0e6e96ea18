// Package api holds hale's SageMaker cluster API: the wire types, their constraint checks and the
// operation table, all generated from the service model extract in model/ (a copy of
// ../shared/sagemaker-cluster-shapes.json, botocore's sagemaker/2017-07-24 model), plus the few
// hand-written pieces the model cannot say: the wire timestamp, the error type and its codes,
// the strict request decoder and the cross-field rules (rules.go).
//
// Generated files end in .gen.go; regenerate them with `go generate ./api`.
package api

//go:generate go run ./internal/gen -model model/sagemaker-cluster-shapes.json -out .
