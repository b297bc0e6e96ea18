package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Environment variables and defaults New reads besides the AWS SDK's own.
const (
	// DataDirEnv names hale's data directory, whose credentials and config files (written by
	// `hale server`) New adds to the AWS shared files.
	DataDirEnv = "HALE_DATA_DIR"
	// DefaultDataDir is the data directory when DataDirEnv is unset, as for `hale server`.
	DefaultDataDir = "/var/lib/hale"
	// DefaultProfile is the profile `hale server` writes its admin key under; New picks it when
	// no profile is named and a shared file has it.
	DefaultProfile = "hale"
	// DefaultRegion is the region used when nothing configures one, as hale's own default.
	DefaultRegion = "us-west-2"
)

// Options choose what New would otherwise find in the environment and the AWS shared files, as
// the AWS CLI's --profile, --region and --endpoint-url do. Empty fields are looked up.
type Options struct {
	// Profile is the shared-file profile to use. Empty: AWS_PROFILE (or AWS_DEFAULT_PROFILE),
	// else "hale" when a shared file (hale's data-directory files included) has that profile,
	// else the SDK's default profile.
	Profile string
	// Region signs the requests. Empty: the SDK's resolution (AWS_REGION, the profile's
	// region), else DefaultRegion.
	Region string
	// EndpointURL is where requests go. Empty: AWS_ENDPOINT_URL_SAGEMAKER, AWS_ENDPOINT_URL, the
	// profile's services section for SageMaker, then the profile's endpoint_url.
	EndpointURL string
	// DataDir is the hale server's data directory whose credentials and config files (and the
	// endpoint the server wrote there) New reads, as `hale --data-dir` would. Empty:
	// HALE_DATA_DIR, else DefaultDataDir. Tests that run several servers in one process name
	// each one's here, since the environment is the process's.
	DataDir string
}

// dataDir is the data directory o names, else the environment's, else the default.
func (o Options) dataDir() string {
	if o.DataDir != "" {
		return o.DataDir
	}
	return envOr(DataDirEnv, DefaultDataDir)
}

// sharedFiles returns the shared credentials and config files to read: the AWS defaults (or
// AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE) followed by hale's data-directory files when
// they exist (dir). The SDK lets later files override earlier ones, so the server's freshly
// written endpoint_url wins over a stale copy of [profile hale] in ~/.aws/config.
func sharedFiles(dir string) (creds, confs []string) {
	creds = []string{envOr("AWS_SHARED_CREDENTIALS_FILE", config.DefaultSharedCredentialsFilename())}
	confs = []string{envOr("AWS_CONFIG_FILE", config.DefaultSharedConfigFilename())}
	if f := filepath.Join(dir, "credentials"); fileExists(f) && !contains(creds, f) {
		creds = append(creds, f)
	}
	if f := filepath.Join(dir, "config"); fileExists(f) && !contains(confs, f) {
		confs = append(confs, f)
	}
	return creds, confs
}

// chooseProfile applies hale's profile precedence. It returns "" to leave the choice to the SDK
// (AWS_PROFILE, AWS_DEFAULT_PROFILE, then "default"); explicit reports whether the profile must
// be passed to the SDK, which then prefers its credentials over AWS_ACCESS_KEY_ID, as the AWS
// CLI does for --profile.
func chooseProfile(o Options, files []string) (profile string, explicit bool) {
	switch {
	case o.Profile != "":
		return o.Profile, true
	case os.Getenv("AWS_PROFILE") != "" || os.Getenv("AWS_DEFAULT_PROFILE") != "":
		return "", false
	}
	for _, f := range files {
		if hasSection(f, DefaultProfile) {
			return DefaultProfile, true
		}
	}
	return "", false
}

// hasSection reports whether the ini file at path has a [name] or [profile name] section.
func hasSection(path, name string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "[") || !strings.HasSuffix(line, "]") {
			continue
		}
		fields := strings.Fields(line[1 : len(line)-1])
		if len(fields) == 1 && fields[0] == name || len(fields) == 2 && fields[0] == "profile" && fields[1] == name {
			return true
		}
	}
	return false
}

// load resolves the aws.Config, the endpoint and the region for o.
func load(ctx context.Context, o Options) (cfg aws.Config, endpoint, profile string, err error) {
	creds, confs := sharedFiles(o.dataDir())
	profile, explicit := chooseProfile(o, append(append([]string{}, creds...), confs...))
	opts := []func(*config.LoadOptions) error{
		config.WithSharedCredentialsFiles(creds),
		config.WithSharedConfigFiles(confs),
		// An EC2 instance role is never a hale key, and probing IMDS off EC2 only delays the
		// "Unable to locate credentials" answer.
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
	}
	if explicit {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	cfg, err = config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		var notExist config.SharedConfigProfileNotExistError
		if errors.As(err, &notExist) {
			return cfg, "", profile, fmt.Errorf("The config profile (%s) could not be found", notExist.Profile)
		}
		return cfg, "", profile, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if profile == "" {
		profile = envOr("AWS_PROFILE", envOr("AWS_DEFAULT_PROFILE", "default"))
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	endpoint = resolveEndpoint(ctx, o, cfg)
	if endpoint == "" {
		endpoint = serverEndpoint(ctx, o.dataDir())
	}
	if endpoint == "" {
		dir := o.dataDir()
		return cfg, "", profile, fmt.Errorf("no endpoint for the hale API: pass --endpoint-url (or set AWS_ENDPOINT_URL_SAGEMAKER, or endpoint_url in profile %q), "+
			"or point %s at the --data-dir of a running hale server, which writes its endpoint there (looked in %s/config)", profile, DataDirEnv, dir)
	}
	return cfg, endpoint, profile, nil
}

// resolveEndpoint follows the AWS precedence for endpoint overrides: the explicit option, then
// the service-specific and global environment variables, then the profile's services section
// and its endpoint_url.
func resolveEndpoint(ctx context.Context, o Options, cfg aws.Config) string {
	if o.EndpointURL != "" {
		return o.EndpointURL
	}
	if strings.EqualFold(os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		return ""
	}
	if v := os.Getenv("AWS_ENDPOINT_URL_SAGEMAKER"); v != "" {
		return v
	}
	if v := os.Getenv("AWS_ENDPOINT_URL"); v != "" {
		return v
	}
	for _, src := range cfg.ConfigSources {
		if sc, ok := src.(config.SharedConfig); ok {
			if v, found, err := sc.GetServiceBaseEndpoint(ctx, "SageMaker"); err == nil && found {
				return v
			}
		}
	}
	if cfg.BaseEndpoint != nil {
		return *cfg.BaseEndpoint
	}
	return ""
}

// serverEndpoint is the endpoint_url of the [profile hale] that the hale server of data directory
// dir wrote: a profile that names only keys (as `hale access-key create --credentials-file` may
// leave) still reaches the local server.
func serverEndpoint(ctx context.Context, dir string) string {
	f := filepath.Join(dir, "config")
	if !fileExists(f) {
		return ""
	}
	sc, err := config.LoadSharedConfigProfile(ctx, DefaultProfile, func(o *config.LoadSharedConfigOptions) {
		o.ConfigFiles = []string{f}
		o.CredentialsFiles = []string{}
	})
	if err != nil {
		return ""
	}
	return sc.BaseEndpoint
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
