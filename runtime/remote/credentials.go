package remote

import (
	"fmt"
	"strings"

	"github.com/memtier/memtier/runtime/errs"
)

// Credentials are an AWS access key pair and an optional session token
// (temporary credentials). They are values; String and GoString never print
// the secret or the token, so a Credentials in a message or log is safe.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// String names the key id only ("AKIA... (secret hidden)").
func (c Credentials) String() string {
	tok := ""
	if c.SessionToken != "" {
		tok = ", session token hidden"
	}
	return fmt.Sprintf("access key %q (secret hidden%s)", c.AccessKeyID, tok)
}

// GoString is String, so %#v hides the secret too.
func (c Credentials) GoString() string { return "remote.Credentials{" + c.String() + "}" }

// resolved is what NewClient found: credentials (or anonymous), their
// origin for messages, and the profile's region and endpoint_url.
type resolved struct {
	creds     Credentials
	anonymous bool
	origin    string // "Options.Credentials", "environment", `profile "x"`
	err       error  // no usable credentials: returned by the first signed request
	region    string // from the profile, "" if none
	endpoint  string // from the profile, "" if none
}

// profileOnlyKinds are profile settings that name credentials MemTier does
// not resolve itself (roles, SSO, processes, web identity).
var profileOnlyKinds = []string{"role_arn", "credential_process", "sso_session", "sso_start_url", "web_identity_token_file"}

// resolveCredentials applies the precedence Options.Credentials, Anonymous,
// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, then the
// profile (Options.Profile, AWS_PROFILE, "default") from the shared files.
// A broken setting (half a key pair, a named profile that does not exist, a
// profile with only a role) is an error now; no credentials at all is kept in
// resolved.err, since http(s) names need none.
func resolveCredentials(o *Options) (resolved, error) {
	var r resolved
	getenv := o.Getenv
	name := o.Profile
	explicitProfile := name != ""
	if name == "" {
		name = getenv("AWS_PROFILE")
		explicitProfile = name != ""
	}
	if name == "" {
		name = "default"
	}
	// The profile's region and endpoint apply whatever supplies the keys.
	p, err := loadProfile(getenv, name)
	if err != nil {
		return r, err
	}
	r.region, r.endpoint = p.settings["region"], p.settings["endpoint_url"]

	switch {
	case o.Anonymous:
		r.anonymous, r.origin = true, "anonymous"
		return r, nil
	case o.Credentials == nil && noSignRequest(getenv(EnvNoSignRequest)):
		// GDAL's name for unsigned requests to public buckets (the AWS CLI's
		// --no-sign-request): https://gdal.org/en/stable/user/virtual_file_systems.html
		r.anonymous, r.origin = true, EnvNoSignRequest
		return r, nil
	case o.Credentials != nil:
		c := *o.Credentials
		if c.AccessKeyID == "" || c.SecretAccessKey == "" {
			return r, errs.New(errs.InvalidArg, "remote credentials", "Options.Credentials needs both AccessKeyID and SecretAccessKey")
		}
		r.creds, r.origin = c, "Options.Credentials"
		return r, nil
	}
	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	switch {
	case id != "" && secret != "":
		r.creds = Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN")}
		r.origin = "environment"
		return r, nil
	case id != "":
		return r, errs.New(errs.InvalidArg, "remote credentials", "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
	case secret != "":
		return r, errs.New(errs.InvalidArg, "remote credentials", "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not")
	}
	if !p.found {
		if explicitProfile {
			credFile, confFile := sharedFiles(getenv)
			return r, errs.New(errs.InvalidArg, "remote credentials", "profile %q not found in %s or %s", name, credFile, confFile)
		}
		r.err = errs.New(errs.Permission, "remote credentials",
			"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; for a public bucket set AWS_NO_SIGN_REQUEST=YES "+
				"(read when this context first used a URL: after changing the environment, use a new context)")
		return r, nil
	}
	id, secret = p.settings["aws_access_key_id"], p.settings["aws_secret_access_key"]
	if id == "" || secret == "" {
		for _, k := range profileOnlyKinds {
			if p.settings[k] != "" {
				return r, errs.New(errs.Unsupported, "remote credentials",
					"profile %q uses %s, which MemTier does not resolve: pass credentials explicitly (Python: from botocore)", name, k)
			}
		}
		if id != "" || secret != "" {
			return r, errs.New(errs.InvalidArg, "remote credentials", "profile %q has only one of aws_access_key_id and aws_secret_access_key", name)
		}
		if explicitProfile {
			return r, errs.New(errs.InvalidArg, "remote credentials", "profile %q has no aws_access_key_id/aws_secret_access_key", name)
		}
		r.err = errs.New(errs.Permission, "remote credentials",
			"no AWS credentials: profile %q has no keys; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_NO_SIGN_REQUEST=YES for a public bucket", name)
		return r, nil
	}
	r.creds = Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: p.settings["aws_session_token"]}
	r.origin = fmt.Sprintf("profile %q", name)
	return r, nil
}

// scrub replaces every occurrence of the secret and session token in s, so
// no message built from server text or a wrapped error can carry them.
func (r *resolved) scrub(s string) string {
	for _, secret := range []string{r.creds.SecretAccessKey, r.creds.SessionToken} {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// EnvNoSignRequest, set to YES (or 1, true, on), sends s3:// requests
// unsigned, for public buckets, when no credentials are given in Options.
const EnvNoSignRequest = "AWS_NO_SIGN_REQUEST"

// noSignRequest reports whether v turns EnvNoSignRequest on.
func noSignRequest(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "yes", "1", "true", "on":
		return true
	}
	return false
}
