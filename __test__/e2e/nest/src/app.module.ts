import { Module } from '@nestjs/common';
import { ShopController } from './shop.controller';
import { ReportService } from './report/report.service';

@Module({
  controllers: [ShopController],
  providers: [ReportService],
})
export class AppModule {}
