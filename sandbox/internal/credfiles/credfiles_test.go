package credfiles

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSanitize: each format keeps its settings and loses every secret —
// tokens, passwords, _auth, the user information of a URL — and says
// whether it held one; what cannot be parsed is refused.
func TestSanitize(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		removed        bool
		err            bool
	}{
		{name: ".npmrc", in: "registry=https://registry.example.com/\n@corp:registry=https://npm.corp/\n//npm.corp/:_authToken=npm_SECRET1\n//registry.example.com/:_auth=U0VDUkVUMg==\n_password=SECRET3\nalways-auth=true\n",
			want: "registry=https://registry.example.com/\n@corp:registry=https://npm.corp/\nalways-auth=true\n", removed: true},
		{name: "/home/u/.npmrc", in: "registry = https://user:SECRET4@npm.corp/\n; a comment\n", want: "registry = https://npm.corp/\n; a comment\n", removed: true},
		{name: ".npmrc", in: "registry=https://registry.npmjs.org/\nsave-exact=true", want: "registry=https://registry.npmjs.org/\nsave-exact=true", removed: false},
		{name: ".npmrc", in: "", want: "", removed: false},
		{name: ".pypirc", in: "[distutils]\nindex-servers =\n    pypi\n    corp\n\n[pypi]\nusername = __token__\npassword = pypi-SECRET5\n\n[corp]\nrepository: https://u:SECRET6@pypi.corp/\n",
			want: "[distutils]\nindex-servers =\n    pypi\n    corp\n\n[pypi]\nusername = __token__\n\n[corp]\nrepository: https://pypi.corp/\n", removed: true},
		{name: ".config/pip/pip.conf", in: "[global]\nindex-url = https://user:SECRET7@pypi.corp/simple\nextra-index-url =\n    https://tok:SECRET8@extra.corp/simple\n    https://pypi.org/simple\ntimeout = 60\n",
			want: "[global]\nindex-url = https://pypi.corp/simple\nextra-index-url =\n    https://extra.corp/simple\n    https://pypi.org/simple\ntimeout = 60\n", removed: true},
		{name: ".pip/pip.conf", in: "[global]\nindex-url = https://pypi.corp/simple\n", want: "[global]\nindex-url = https://pypi.corp/simple\n", removed: false},
		{name: ".pypirc", in: "[pypi]\npassword =\n    SECRET9\nusername = u\n", want: "[pypi]\nusername = u\n", removed: true},
		{name: ".cargo/credentials.toml", in: "[registry]\ntoken = \"cio_SECRET10\"\n\n[registries.corp]\ntoken = \"SECRET11\"\nsecret-key = \"k3.secret.SECRET12\"\nindex = \"sparse+https://corp/\"\n",
			want: "[registry]\n\n[registries.corp]\nindex = \"sparse+https://corp/\"\n", removed: true},
		{name: ".cargo/credentials", in: "registry.token = \"SECRET13\"\n", want: "", removed: true},
		{name: ".cargo/credentials", in: "[registry]\ntoken = \"\"\"\nSECRET14\n\"\"\"\n", err: true},
		{name: ".cargo/credentials", in: "registry = { token = \"SECRET15\" }\n", err: true},
		{name: ".docker/config.json", in: `{"auths":{"ghcr.io":{"auth":"SECRET16"},"corp:5000":{"identitytoken":"SECRET17","email":"a@b"}},"credsStore":"desktop","proxies":{"default":{"httpProxy":"http://u:SECRET18@proxy:3128"}}}`,
			want: "{\n\t\"auths\": {\n\t\t\"corp:5000\": {\n\t\t\t\"email\": \"a@b\"\n\t\t},\n\t\t\"ghcr.io\": {}\n\t},\n\t\"credsStore\": \"desktop\",\n\t\"proxies\": {\n\t\t\"default\": {\n\t\t\t\"httpProxy\": \"http://proxy:3128\"\n\t\t}\n\t}\n}\n", removed: true},
		{name: ".docker/config.json", in: `{"auths": {"x": {"auth": "SECRET19"}}} {}`, err: true},
		{name: ".docker/config.json", in: `{"auths": `, err: true},
		{name: ".npmrc", in: "registry=x\x00_authToken=SECRET20\n", err: true},
		{name: ".npmrc", in: "registry=x\n\xff\xfe\n", err: true},
		{name: ".npmrc", in: "//npm.corp/:_authToken\n", err: true},
		{name: ".bashrc", in: "x=1\n", err: true},
	} {
		out, removed, err := Sanitize(tc.name, []byte(tc.in))
		if tc.err {
			assert.ErrorIs(t, err, ErrUnparsable, "%s: %q", tc.name, tc.in)
			continue
		}
		if !assert.NoError(t, err, "%s: %q", tc.name, tc.in) {
			continue
		}
		assert.Equal(t, tc.want, string(out), "%s: %q", tc.name, tc.in)
		assert.Equal(t, tc.removed, removed, "%s: %q", tc.name, tc.in)
		assert.NotContains(t, string(out), "SECRET", "%s", tc.name)
	}
}

// TestCopy: a copy is made from a regular file only, read-only, in the
// given directory, without the secret; a symbolic link, a directory or a
// file larger than MaxSize gets none.
func TestCopy(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	npmrc := filepath.Join(home, ".npmrc")
	require.NoError(t, os.WriteFile(npmrc, []byte("registry=https://r/\n//r/:_authToken=SECRET\n"), 0o600))
	c, err := Copy(npmrc, dir)
	require.NoError(t, err)
	assert.Equal(t, dir, filepath.Dir(c))
	b, err := os.ReadFile(c)
	require.NoError(t, err)
	assert.Equal(t, "registry=https://r/\n", string(b))
	st, err := os.Stat(c)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o444), st.Mode().Perm())
	orig, err := os.ReadFile(npmrc)
	require.NoError(t, err)
	assert.Contains(t, string(orig), "SECRET", "the original is untouched")

	link := filepath.Join(home, ".pypirc")
	require.NoError(t, os.Symlink(npmrc, link))
	_, err = Copy(link, dir)
	assert.Error(t, err, "a symbolic link is not followed")
	require.NoError(t, os.Mkdir(filepath.Join(home, ".cargo"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(home, ".cargo", "credentials"), 0o700))
	_, err = Copy(filepath.Join(home, ".cargo", "credentials"), dir)
	assert.ErrorIs(t, err, ErrUnparsable, "a directory")
	big := filepath.Join(t.TempDir(), ".npmrc")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("a=b\n", MaxSize/4+1)), 0o600))
	_, err = Copy(big, dir)
	assert.True(t, errors.Is(err, ErrUnparsable), "too large: %v", err)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "only the one copy")
}
