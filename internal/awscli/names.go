package awscli

import (
	"regexp"
	"strings"
)

// The AWS CLI derives command and option names from the model with botocore's xform_name;
// these are its three rules, so that hale spells every name as `aws sagemaker` does
// (CreateCluster → create-cluster, InstanceGroupsToDelete → instance-groups-to-delete,
// SourceS3Uri → source-s3-uri).
var (
	firstCapRe    = regexp.MustCompile(`(.)([A-Z][a-z]+)`)
	endCapRe      = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	pluralAcronym = regexp.MustCompile(`[A-Z]{2,}s$`) // ARNs, ACLs: kept as one word
)

// kebab converts a CamelCase model name to the AWS CLI's kebab-case spelling.
func kebab(name string) string {
	if strings.Contains(name, "-") {
		return name
	}
	if m := pluralAcronym.FindString(name); m != "" {
		name = name[:len(name)-len(m)] + "-" + strings.ToLower(m)
	}
	s := firstCapRe.ReplaceAllString(name, "${1}-${2}")
	return strings.ToLower(endCapRe.ReplaceAllString(s, "${1}-${2}"))
}
