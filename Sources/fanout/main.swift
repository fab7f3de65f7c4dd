import FanoutCLI
import Foundation

exit(await Fanout.main())
