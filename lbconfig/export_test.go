package lbconfig

// PolicyPackages returns the table of pickwise policies' names and
// packages, for the test that checks it against the packages.
func PolicyPackages() map[string]string {
	m := make(map[string]string, len(policyPackages))
	for _, p := range policyPackages {
		m[p.name] = p.pkg
	}
	return m
}
