package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gopkg.in/ini.v1"

	"github.com/haleproject/hale/internal/store"
)

// iniOptions read AWS's shared files the way the AWS CLI and SDKs do, so that writing one back
// leaves the sections hale does not own meaning what they meant: values are kept verbatim (no
// inline comments, quotes or line continuations interpreted), and indented sub-keys under a key
// (the "s3 =\n  max_concurrent_requests = 10" form) are kept as nested values.
var iniOptions = ini.LoadOptions{
	AllowNestedValues:       true,
	IgnoreInlineComment:     true,
	IgnoreContinuation:      true,
	PreserveSurroundedQuote: true,
	KeyValueDelimiters:      "=",
}

// WriteCredentialsProfile writes k into the AWS shared credentials file at path (usually
// ~/.aws/credentials) as section [profile] with aws_access_key_id and aws_secret_access_key, so
// the AWS CLI and SDKs find it with --profile / AWS_PROFILE. Other sections of an existing file
// are kept; the named section keeps its place but loses all its old keys, so no stale key (an
// aws_session_token, which hale would refuse) survives in it. The parent directory is created with mode 0700 and the file
// is written with mode 0600, since it holds a secret. File format: AWS SDKs and Tools reference
// guide, "Shared config and credentials files".
func WriteCredentialsProfile(path, profile string, k *store.AccessKey) error {
	if profile == "" || k == nil || k.ID == "" || k.Secret == "" {
		return errors.New("auth: writing credentials needs a profile name and a key with an id and a secret")
	}
	return updateINI(path, profile, [][2]string{
		{"aws_access_key_id", k.ID},
		{"aws_secret_access_key", k.Secret},
	})
}

// WriteConfigProfile writes region and endpoint_url into the AWS shared config file at path
// (usually ~/.aws/config) for profile, so that the AWS CLI and SDKs send that profile's requests
// to hale (endpoint_url is the shared-config form of a service endpoint override). The section
// is [default] for "default" and [profile NAME] otherwise, as the config file spells it. Empty
// values are left out. Other sections are kept; the named one keeps its place but loses its old
// keys (a stale role_arn or sso_* setting would send the SDK elsewhere for credentials). The
// file and its directory get modes 0600 and 0700 like the credentials file.
func WriteConfigProfile(path, profile, region, endpointURL string) error {
	if profile == "" {
		return errors.New("auth: writing a config profile needs a profile name")
	}
	section := "profile " + profile
	if profile == "default" {
		section = "default"
	}
	var keys [][2]string
	if region != "" {
		keys = append(keys, [2]string{"region", region})
	}
	if endpointURL != "" {
		keys = append(keys, [2]string{"endpoint_url", endpointURL})
	}
	return updateINI(path, section, keys)
}

// updateINI sets section of the ini file at path (created when absent) to exactly keys, in order.
func updateINI(path, section string, keys [][2]string) error {
	// Write through a symlink (a ~/.aws/credentials kept elsewhere) rather than replacing it.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("auth: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth: %w", err)
	}

	f := ini.Empty(iniOptions)
	existing, err := os.ReadFile(path)
	switch {
	case err == nil:
		if f, err = ini.LoadSources(iniOptions, existing); err != nil {
			// The parser quotes the offending line, which may hold a secret: say only where.
			return fmt.Errorf("auth: %s is not a valid AWS shared config or credentials file", path)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("auth: %w", err)
	}
	// Empty the section in place rather than deleting it, so it keeps its place and comment.
	sec, err := f.NewSection(section) // the existing section when there is one
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	for _, name := range sec.KeyStrings() {
		sec.DeleteKey(name)
	}
	for _, kv := range keys {
		if _, err := sec.NewKey(kv[0], kv[1]); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// writeFileAtomic writes data to path with mode 0600 through a temporary file in the same
// directory and a rename, so a reader never sees half a file and the secret is never readable by
// others, not even briefly.
func writeFileAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp") // created 0600
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("auth: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// HasProfile reports whether the AWS shared file at path (credentials or config) has a section
// for profile: [name], or [profile name] in a config file. A missing file has none.
func HasProfile(path, profile string) (bool, error) {
	f, err := ini.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("auth: %s is not an AWS shared file", path)
	}
	return f.HasSection(profile) || f.HasSection("profile "+profile), nil
}

// ReadConfigProfile returns the region and endpoint_url of a profile in an AWS config file.
func ReadConfigProfile(path, profile string) (region, endpointURL string, err error) {
	f, err := ini.Load(path)
	if err != nil {
		return "", "", fmt.Errorf("auth: %w", err)
	}
	name := "profile " + profile
	if profile == "default" {
		name = "default"
	}
	sec, err := f.GetSection(name)
	if err != nil {
		return "", "", fmt.Errorf("auth: %s has no [%s]", path, name)
	}
	return sec.Key("region").String(), sec.Key("endpoint_url").String(), nil
}
