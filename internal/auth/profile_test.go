package auth

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"gopkg.in/ini.v1"

	"github.com/haleproject/hale/internal/store"
)

// clearAWSEnv keeps the environment's AWS settings out of LoadDefaultConfig.
func clearAWSEnv(t *testing.T) {
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER",
		"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
		"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func loadProfile(t *testing.T, credPath, configPath, profile string) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithSharedCredentialsFiles([]string{credPath}),
		config.WithSharedConfigFiles([]string{configPath}),
		config.WithSharedConfigProfile(profile),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

// TestProfilesReadBackBySDK writes a fresh profile and checks that the AWS SDK's own config
// loader finds the key, region and endpoint, and that a SageMaker client built from it is
// accepted by a Verifier.
func TestProfilesReadBackBySDK(t *testing.T) {
	clearAWSEnv(t)
	srv := newServer(t, newVerifier(), false)
	dir := filepath.Join(t.TempDir(), "home", ".aws")
	credPath, configPath := filepath.Join(dir, "credentials"), filepath.Join(dir, "config")
	if err := WriteCredentialsProfile(credPath, "hale", testKey); err != nil {
		t.Fatal(err)
	}
	if err := WriteConfigProfile(configPath, "hale", "us-east-2", srv.URL); err != nil {
		t.Fatal(err)
	}
	wantMode(t, dir, 0o700)
	wantMode(t, credPath, 0o600)
	wantMode(t, configPath, 0o600)

	cfg := loadProfile(t, credPath, configPath, "hale")
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != testID || creds.SecretAccessKey != testSecret || creds.SessionToken != "" {
		t.Errorf("credentials %s / (secret matches: %v) / token %q", creds.AccessKeyID, creds.SecretAccessKey == testSecret, creds.SessionToken)
	}
	if cfg.Region != "us-east-2" {
		t.Errorf("region %q", cfg.Region)
	}
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != srv.URL {
		t.Errorf("BaseEndpoint %v, want %s", cfg.BaseEndpoint, srv.URL)
	}
	c := sagemaker.NewFromConfig(cfg, func(o *sagemaker.Options) { o.RetryMaxAttempts = 1 })
	if _, err := c.ListClusters(context.Background(), &sagemaker.ListClustersInput{}); err != nil {
		t.Errorf("ListClusters with the written profile: %v", err)
	}
}

func TestProfilesKeepOtherSections(t *testing.T) {
	clearAWSEnv(t)
	dir := t.TempDir()
	credPath, configPath := filepath.Join(dir, "credentials"), filepath.Join(dir, "config")
	oldCreds := `# my keys
[default]
aws_access_key_id = AKIADEFAULTDEFAULT00
aws_secret_access_key = default/secret+with#hash;semicolon

[hale]
aws_access_key_id = AKIAOLDOLDOLDOLDOLD0
aws_secret_access_key = old
aws_session_token = stale-token
`
	oldConfig := `[default]
region = eu-central-1
output = json

[profile dev]
region = ap-south-1
s3 =
  max_concurrent_requests = 20
  addressing_style = path

[profile hale]
region = old-region
role_arn = arn:aws:iam::123456789012:role/Stale
source_profile = default
`
	if err := os.WriteFile(credPath, []byte(oldCreds), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(configPath, []byte(oldConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteCredentialsProfile(credPath, "hale", testKey); err != nil {
		t.Fatal(err)
	}
	if err := WriteConfigProfile(configPath, "hale", "us-west-2", "https://hale.example.com:8443"); err != nil {
		t.Fatal(err)
	}
	wantMode(t, credPath, 0o600)
	wantMode(t, configPath, 0o600)

	// The replaced sections hold exactly hale's keys; the others are untouched.
	cf, err := ini.LoadSources(iniOptions, credPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Section("hale").KeyStrings(); !slices.Equal(got, []string{"aws_access_key_id", "aws_secret_access_key"}) {
		t.Errorf("[hale] keys %v", got)
	}
	if got := cf.Section("default").Key("aws_secret_access_key").String(); got != "default/secret+with#hash;semicolon" {
		t.Errorf("[default] secret changed to %q", got)
	}
	gf, err := ini.LoadSources(iniOptions, configPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := gf.Section("profile hale").KeyStrings(); !slices.Equal(got, []string{"region", "endpoint_url"}) {
		t.Errorf("[profile hale] keys %v", got)
	}
	if got := gf.Section("profile dev").Key("s3").NestedValues(); !slices.Equal(got, []string{"max_concurrent_requests = 20", "addressing_style = path"}) {
		t.Errorf("nested s3 values %q", got)
	}

	// What the SDK reads: hale's profile, and the default profile as it was.
	cfg := loadProfile(t, credPath, configPath, "hale")
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != testID || creds.SecretAccessKey != testSecret || creds.SessionToken != "" {
		t.Errorf("hale credentials %s, token %q", creds.AccessKeyID, creds.SessionToken)
	}
	if cfg.Region != "us-west-2" || cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "https://hale.example.com:8443" {
		t.Errorf("hale region %q endpoint %v", cfg.Region, cfg.BaseEndpoint)
	}
	def := loadProfile(t, credPath, configPath, "default")
	dc, err := def.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if dc.AccessKeyID != "AKIADEFAULTDEFAULT00" || dc.SecretAccessKey != "default/secret+with#hash;semicolon" || def.Region != "eu-central-1" {
		t.Errorf("default profile changed: %s %q", dc.AccessKeyID, def.Region)
	}
	if def.BaseEndpoint != nil {
		t.Errorf("default profile got an endpoint %q", *def.BaseEndpoint)
	}

	// Writing the default profile uses [default], not [profile default].
	if err := WriteConfigProfile(configPath, "default", "us-east-1", "http://127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	def = loadProfile(t, credPath, configPath, "default")
	if def.Region != "us-east-1" || def.BaseEndpoint == nil || *def.BaseEndpoint != "http://127.0.0.1:8080" {
		t.Errorf("default region %q endpoint %v", def.Region, def.BaseEndpoint)
	}
	b, _ := os.ReadFile(configPath)
	if strings.Contains(string(b), "[profile default]") || strings.Contains(string(b), "output") {
		t.Errorf("config file:\n%s", b)
	}
}

func TestProfileThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real-credentials")
	link := filepath.Join(dir, "credentials")
	if err := os.WriteFile(real, []byte("[other]\naws_access_key_id = AKIAOTHER\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	if err := WriteCredentialsProfile(link, "hale", testKey); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v", err)
	}
	b, _ := os.ReadFile(real)
	if !strings.Contains(string(b), testID) || !strings.Contains(string(b), "AKIAOTHER") {
		t.Errorf("real file:\n%s", b)
	}
}

func TestProfileErrorsHideSecrets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "credentials")
	if err := os.WriteFile(path, []byte("[x]\nthis line has no delimiter SECRETVALUE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteCredentialsProfile(path, "hale", testKey)
	if err == nil {
		t.Fatal("an unparsable file was rewritten")
	}
	if strings.Contains(err.Error(), "SECRETVALUE") || strings.Contains(err.Error(), testSecret) {
		t.Errorf("error leaks file content: %v", err)
	}
	if err := WriteCredentialsProfile(path, "hale", &store.AccessKey{ID: testID}); err == nil {
		t.Error("a key without a secret was written")
	}
	if err := WriteConfigProfile(path, "", "r", "u"); err == nil {
		t.Error("an empty profile name was accepted")
	}
}
