// KAI's podgroupcontroller, started as its own main (cmd/podgroupcontroller of
// github.com/NVIDIA/KAI-scheduler) starts it: same options, logger and app.Run. One difference:
// KAI's controller manager serves its metrics on controller-runtime's default address (":8080",
// every interface), as its --metrics-bind-address flag is parsed but never passed on. Here that
// flag sets the default before the manager is made, so the e2e tier binds it to loopback (or
// turns it off with "0") and clusters started side by side on one machine do not collide.
package main

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/NVIDIA/KAI-scheduler/cmd/podgroupcontroller/app"
)

func main() {
	options := app.InitOptions(nil)
	logging := zap.Options{
		Development: true,
		TimeEncoder: zapcore.ISO8601TimeEncoder,
		Level:       zapcore.Level(-1 * options.LogLevel),
	}
	logging.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&logging)))
	metricsserver.DefaultBindAddress = options.MetricsAddr

	if err := app.Run(options, ctrl.GetConfigOrDie(), ctrl.SetupSignalHandler()); err != nil {
		fmt.Printf("Error while running the app: %v", err)
		os.Exit(1)
	}
}
