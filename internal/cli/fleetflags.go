package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spillwaylb/spillway/internal/fleet"
)

// fleetPasswordEnv is the environment variable that holds the etcd
// password when --fleet-password-file is not given.
const fleetPasswordEnv = "SPILLWAY_FLEET_PASSWORD"

// fleetEnv is the environment variable --fleet defaults to.
const fleetEnv = "SPILLWAY_FLEET"

// fleetFlags are the flags that say how to reach the fleet's etcd,
// shared by spillway serve and spillway config.
type fleetFlags struct {
	endpoints, prefix  *string
	ca, cert, key      *string
	user, passwordFile *string
	// autoSync is fleet.ClientConfig.AutoSync (set by serve with
	// --fleet-embedded).
	autoSync time.Duration
}

func addFleetFlags(fs *flag.FlagSet, endpointsHelp string) *fleetFlags {
	return &fleetFlags{
		endpoints:    fs.String("fleet", os.Getenv(fleetEnv), endpointsHelp),
		prefix:       fs.String("fleet-prefix", fleet.DefaultPrefix, "key `PREFIX` of the fleet's keys in etcd (several fleets can share one etcd)"),
		ca:           fs.String("fleet-ca", "", "CA certificate `FILE` of etcd's server certificates (turns on TLS)"),
		cert:         fs.String("fleet-cert", "", "client certificate `FILE` for etcd (with --fleet-key; turns on TLS)"),
		key:          fs.String("fleet-key", "", "client key `FILE` for etcd (with --fleet-cert)"),
		user:         fs.String("fleet-user", "", "etcd user `NAME` (password: --fleet-password-file or $"+fleetPasswordEnv+")"),
		passwordFile: fs.String("fleet-password-file", "", "`FILE` holding the etcd password of --fleet-user"),
	}
}

// given reports whether --fleet (or $SPILLWAY_FLEET) names etcd.
func (f *fleetFlags) given() bool { return strings.TrimSpace(*f.endpoints) != "" }

// clientConfig turns the flags into a fleet.ClientConfig.
func (f *fleetFlags) clientConfig() (fleet.ClientConfig, error) {
	if !f.given() {
		return fleet.ClientConfig{}, fmt.Errorf("no etcd to reach (fix: give --fleet etcd://host:2379,host:2379, or set $%s)", fleetEnv)
	}
	eps, secure, err := fleet.ParseEndpoints(*f.endpoints)
	if err != nil {
		return fleet.ClientConfig{}, err
	}
	cc := fleet.ClientConfig{Endpoints: eps, Secure: secure, CAFile: *f.ca, CertFile: *f.cert, KeyFile: *f.key, Username: *f.user, AutoSync: f.autoSync}
	if cc.Username != "" {
		if *f.passwordFile != "" {
			b, err := os.ReadFile(*f.passwordFile)
			if err != nil {
				return fleet.ClientConfig{}, fmt.Errorf("--fleet-password-file: %w", err)
			}
			cc.Password = strings.TrimSpace(string(b))
		} else {
			cc.Password = os.Getenv(fleetPasswordEnv)
		}
		if cc.Password == "" {
			return fleet.ClientConfig{}, fmt.Errorf("--fleet-user %s has no password (fix: give --fleet-password-file FILE or set $%s)", cc.Username, fleetPasswordEnv)
		}
	} else if *f.passwordFile != "" {
		return fleet.ClientConfig{}, fmt.Errorf("--fleet-password-file without --fleet-user (fix: give --fleet-user NAME)")
	}
	return cc, nil
}

// store dials etcd and returns the fleet's store and a function that
// closes the client.
func (f *fleetFlags) store() (*fleet.Store, func(), error) {
	cc, err := f.clientConfig()
	if err != nil {
		return nil, nil, err
	}
	cl, err := cc.Dial()
	if err != nil {
		return nil, nil, err
	}
	return fleet.NewStore(cl, *f.prefix), func() { cl.Close() }, nil
}
