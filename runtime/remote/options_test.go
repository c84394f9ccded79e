package remote

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memtier/memtier/runtime/errs"
)

func TestOptions_DefaultsAndValidate(t *testing.T) {
	o := (&Options{}).EnsureDefaults()
	if o.PartBytes != 8<<20 || o.OpenBytes != 64<<10 || o.MaxConcurrency != 64 || o.MaxAttempts != 6 ||
		o.RetryBudget != 60*time.Second || o.BackoffBase != 100*time.Millisecond || o.BackoffMax != 5*time.Second ||
		o.HeaderTimeout != 30*time.Second || o.StallTimeout != 30*time.Second {
		t.Errorf("defaults = %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.PartBytes = MinPartBytes - 1 }, "PartBytes=5242879: want 5242880 (5 MiB) to"},
		{func(o *Options) { o.PartBytes = MaxPartBytes + 1 }, "PartBytes=1073741825"},
		{func(o *Options) { o.OpenBytes = -2 }, "OpenBytes=-2"},
		{func(o *Options) { o.MaxConcurrency = 1025 }, "MaxConcurrency=1025"},
		{func(o *Options) { o.MaxAttempts = -1 }, "MaxAttempts=-1"},
		{func(o *Options) { o.BackoffMax = time.Millisecond }, "BackoffBase=100ms BackoffMax=1ms"},
		{func(o *Options) { o.Endpoint = "ftp://x" }, `Endpoint="ftp://x": want http://host`},
		{func(o *Options) { o.Endpoint = "http://u:secretpw@h" }, "credentials in the endpoint URL"},
		{func(o *Options) { o.Endpoint = "http://h/?a=1" }, "no query or fragment"},
	} {
		o := (&Options{}).EnsureDefaults()
		tc.set(o)
		err := o.Validate()
		if errs.CodeOf(err) != errs.InvalidArg || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secretpw") {
			t.Errorf("Validate = %v, want InvalidArg with %q", err, tc.want)
		}
	}
}

func TestNewClient_EndpointAndRegionPrecedence(t *testing.T) {
	for _, tc := range []struct {
		env            []string
		opt            Options
		region, origin string
		endpoint       string
	}{
		{nil, Options{}, "us-east-1", "none", "https://s3.us-east-1.amazonaws.com"},
		{[]string{"AWS_DEFAULT_REGION", "ap-south-1"}, Options{}, "ap-south-1", "none", "https://s3.ap-south-1.amazonaws.com"},
		{[]string{"AWS_REGION", "eu-west-1", "AWS_DEFAULT_REGION", "x", "AWS_ENDPOINT_URL", "http://a:1/", "AWS_ENDPOINT_URL_S3", "http://s3only:2"},
			Options{}, "eu-west-1", "none", "http://s3only:2"},
		{[]string{"AWS_ENDPOINT_URL", "http://a:1/p/"}, Options{}, "us-east-1", "none", "http://a:1/p"},
		{[]string{"AWS_REGION", "eu-west-1", "AWS_ENDPOINT_URL", "http://a:1", "AWS_ACCESS_KEY_ID", "A", "AWS_SECRET_ACCESS_KEY", "S"},
			Options{Region: "r", Endpoint: "http://opt:3"}, "r", "environment", "http://opt:3"},
	} {
		o := tc.opt
		o.Getenv = testEnv(tc.env...)
		c, err := NewClient(o)
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if c.Region() != tc.region || c.Endpoint() != tc.endpoint || c.CredentialsOrigin() != tc.origin {
			t.Errorf("%v: region %s endpoint %s origin %s", tc.env, c.Region(), c.Endpoint(), c.CredentialsOrigin())
		}
	}
	o := Options{Getenv: testEnv("AWS_ENDPOINT_URL_S3", "localhost:9000")}
	if _, err := NewClient(o); err == nil || !strings.Contains(err.Error(), `AWS_ENDPOINT_URL_S3="localhost:9000": want http://`) {
		t.Errorf("bad env endpoint: %v", err)
	}
}

// writeFile writes a shared file in a temp dir and returns its path.
func writeFile(t *testing.T, name, body string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCredentials_Resolution(t *testing.T) {
	creds := writeFile(t, "credentials", `
# comment
[default]
aws_access_key_id = DEFKEY
aws_secret_access_key = DEFSECRET

[dev]
aws_access_key_id=DEVKEY
aws_secret_access_key=DEV/SECRET+x=;#kept
aws_session_token = DEVTOKEN
[role]
role_arn = arn:aws:iam::1:role/x
source_profile = default
[half]
aws_access_key_id = ONLYKEY
`)
	conf := writeFile(t, "config", `
[default]
region = eu-central-1
[profile dev]
region = us-west-2
endpoint_url = http://dev-endpoint:9000
s3 =
  addressing_style = path
[profile cfgonly]
aws_access_key_id = CFGKEY
aws_secret_access_key = CFGSECRET
`)
	files := []string{"AWS_SHARED_CREDENTIALS_FILE", creds, "AWS_CONFIG_FILE", conf}
	for _, tc := range []struct {
		name                 string
		env                  []string
		opt                  Options
		id, secret, token    string
		origin, region, endp string
	}{
		{"default profile", files, Options{}, "DEFKEY", "DEFSECRET", "", `profile "default"`, "eu-central-1", "https://s3.eu-central-1.amazonaws.com"},
		{"AWS_PROFILE", append([]string{"AWS_PROFILE", "dev"}, files...), Options{}, "DEVKEY", "DEV/SECRET+x=;#kept", "DEVTOKEN", `profile "dev"`, "us-west-2", "http://dev-endpoint:9000"},
		{"Options.Profile wins", append([]string{"AWS_PROFILE", "dev"}, files...), Options{Profile: "cfgonly"}, "CFGKEY", "CFGSECRET", "", `profile "cfgonly"`, "us-east-1", "https://s3.us-east-1.amazonaws.com"},
		{"env beats profile", append([]string{"AWS_PROFILE", "dev", "AWS_ACCESS_KEY_ID", "ENVKEY", "AWS_SECRET_ACCESS_KEY", "ENVSECRET", "AWS_SESSION_TOKEN", "ENVTOK"}, files...), Options{},
			"ENVKEY", "ENVSECRET", "ENVTOK", "environment", "us-west-2", "http://dev-endpoint:9000"},
		{"AWS_NO_SIGN_REQUEST beats env keys", append([]string{"AWS_NO_SIGN_REQUEST", "YES", "AWS_ACCESS_KEY_ID", "ENVKEY", "AWS_SECRET_ACCESS_KEY", "ENVSECRET"}, files...), Options{},
			"", "", "", "AWS_NO_SIGN_REQUEST", "eu-central-1", "https://s3.eu-central-1.amazonaws.com"},
		{"explicit beats env", append([]string{"AWS_ACCESS_KEY_ID", "ENVKEY", "AWS_SECRET_ACCESS_KEY", "ENVSECRET"}, files...),
			Options{Credentials: &Credentials{AccessKeyID: "OPT", SecretAccessKey: "OPTS"}}, "OPT", "OPTS", "", "Options.Credentials", "eu-central-1", "https://s3.eu-central-1.amazonaws.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opt
			o.Getenv = testEnv(tc.env...)
			c, err := NewClient(o)
			if err != nil {
				t.Fatal(err)
			}
			got := c.res.creds
			if got.AccessKeyID != tc.id || got.SecretAccessKey != tc.secret || got.SessionToken != tc.token ||
				c.CredentialsOrigin() != tc.origin || c.Region() != tc.region || c.Endpoint() != tc.endp {
				t.Errorf("creds %s/%s/%s origin %s region %s endpoint %s", got.AccessKeyID, got.SecretAccessKey, got.SessionToken,
					c.CredentialsOrigin(), c.Region(), c.Endpoint())
			}
		})
	}
	for _, tc := range []struct {
		name string
		env  []string
		opt  Options
		code errs.Code
		want string
	}{
		{"missing profile", append([]string{"AWS_PROFILE", "nope"}, files...), Options{}, errs.InvalidArg, `profile "nope" not found in ` + creds + " or " + conf},
		{"role profile", files, Options{Profile: "role"}, errs.Unsupported, `profile "role" uses role_arn, which MemTier does not resolve`},
		{"half profile", files, Options{Profile: "half"}, errs.InvalidArg, `profile "half" has only one of aws_access_key_id and aws_secret_access_key`},
		{"half env", []string{"AWS_ACCESS_KEY_ID", "K"}, Options{}, errs.InvalidArg, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"},
		{"half env secret", []string{"AWS_SECRET_ACCESS_KEY", "NEVERSHOWN"}, Options{}, errs.InvalidArg, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not"},
		{"half explicit", nil, Options{Credentials: &Credentials{AccessKeyID: "K"}}, errs.InvalidArg, "needs both AccessKeyID and SecretAccessKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opt
			o.Getenv = testEnv(tc.env...)
			_, err := NewClient(o)
			if errs.CodeOf(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v (%v), want %v with %q", err, errs.CodeOf(err), tc.code, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "DEFSECRET") || strings.Contains(err.Error(), "NEVERSHOWN")) {
				t.Errorf("secret in %v", err)
			}
		})
	}
	// An unreadable shared file is an error naming it (a directory reads as EISDIR).
	dir := t.TempDir()
	_, err := NewClient(Options{Getenv: testEnv("AWS_SHARED_CREDENTIALS_FILE", dir)})
	if err == nil || !strings.Contains(err.Error(), "read AWS shared file "+dir) {
		t.Errorf("unreadable file: %v", err)
	}
}

func TestParseINI(t *testing.T) {
	ini := parseINI([]byte("x=1\n[ a  b ]\r\nk = v = w\n; c\nnested =\n  sub = 2\n\tother: 3\nafter = 4\n[broken\ny=5\n"))
	a := ini["a b"]
	if a["k"] != "v = w" || a["nested.sub"] != "2" || a["nested.other"] != "3" || a["after"] != "4" || len(ini) != 1 {
		t.Errorf("ini = %v", ini)
	}
}
