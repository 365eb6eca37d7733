package sshconfig

import (
	"path"
	"strings"
)

// openSSHKeywords are the client keywords OpenSSH (up to 10.x) knows, in
// lower case, deprecated ones included. A line with any other keyword is one
// OpenSSH refuses ("Bad configuration option"): gssh ignores the line and
// warns, unless IgnoreUnknown names it. From `ssh -G` output and ssh_config(5).
var openSSHKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`
addkeystoagent addressfamily batchmode bindaddress bindinterface canonicaldomains
canonicalizefallbacklocal canonicalizehostname canonicalizemaxdots canonicalizepermittedcnames
casignaturealgorithms certificatefile channeltimeout challengeresponseauthentication checkhostip
cipher ciphers clearallforwardings compression compressionlevel connectionattempts connecttimeout
controlmaster controlpath controlpersist dsaauthentication dynamicforward enableescapecommandline
enablesshkeysign escapechar exitonforwardfailure fallbacktorsh fingerprinthash
forkafterauthentication forwardagent forwardx11 forwardx11timeout forwardx11trusted gatewayports
globalknownhostsfile gssapiauthentication gssapiclientidentity gssapidelegatecredentials
gssapikexalgorithms gssapikeyexchange gssapirenewalforcesrekey gssapiserveridentity gssapitrustdns
hashknownhosts host hostbasedacceptedalgorithms hostbasedauthentication hostbasedkeytypes
hostkeyalgorithms hostkeyalias hostname identitiesonly identityagent identityfile identityfile2
ignoreunknown include ipqos kbdinteractiveauthentication kbdinteractivedevices kexalgorithms
knownhostscommand localcommand localforward loglevel logverbose macs match
nohostauthenticationforlocalhost numberofpasswordprompts obscurekeystroketiming
passwordauthentication permitlocalcommand permitremoteopen pkcs11provider port
preferredauthentications protocol proxycommand proxyjump proxyusefdpass pubkeyacceptedalgorithms
pubkeyacceptedkeytypes pubkeyauthentication refuseconnection rekeylimit remotecommand
remoteforward requesttty requiredrsasize revokedhostkeys rhostsrsaauthentication
rsaauthentication securitykeyprovider sendenv serveralivecountmax serveraliveinterval sessiontype
setenv skeyauthentication smartcarddevice stdinnull streamlocalbindmask streamlocalbindunlink
stricthostkeychecking syslogfacility tag tcpkeepalive tisauthentication tunnel tunneldevice
updatehostkeys useblacklistedkeys useprivilegedport user userknownhostsfile useroaming usersh
verifyhostkeydns versionaddendum visualhostkey warnweakcrypto xauthlocation`) {
		m[k] = true
	}
	return m
}()

// ignored reports whether key matches one of the IgnoreUnknown patterns
// (comma-separated, case-insensitive globs) seen so far.
func ignored(patterns []string, key string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), key); ok {
			return true
		}
	}
	return false
}
